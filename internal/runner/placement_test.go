package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
)

// TestRunPlacesTheSystemUnderTest: a local run puts its replicas below
// drill's CPU priority and applies a service's CPU limit: in a cgroup of the
// run (the replica reads its own /proc/self/cgroup) where drill may make
// one, else at nice +5 with the limit named in the validity warnings. The
// summary's PRIORITY line and run.json's environment.priority say what was
// applied; the cgroup and the journal are gone after the run.
// sutPriority: same without a limit places nothing.
func TestRunPlacesTheSystemUnderTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two short drills")
	}
	for _, tc := range []struct {
		name, local, resources string
	}{
		{name: "lower with a limit", resources: "    resources: {limits: {cpu: 300m}}\n"},
		{name: "same", local: "environment:\n  local: {sutPriority: same}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: placed
` + tc.local + `timeline:
  duration: 1s
dependencies:
  - name: stub
    httpStub: {}
services:
  - name: app
    command: [sh, -c, 'echo "cgroups:"; cat /proc/self/cgroup; exec sleep 300']
` + tc.resources + `streams:
  - name: s
    targets:
      - url: ${dependencies.stub.url}/
    rate: 5/s
`
			a := runValid(t, func() (Options, *bytes.Buffer) {
				var out bytes.Buffer
				opts := runOptions(t, writeScenarioIn(t, t.TempDir(), src), &out)
				opts.RunID = inject.NewRunID(time.Now())
				return opts, &out
			})
			res, err, opts, out := a.res, a.err, a.opts, a.out
			if res.Code != exitcode.OK || res.Record == nil {
				t.Fatalf("code %d, err %v\n%s", res.Code, err, out.String())
			}
			p := res.Record.Environment.Priority
			if p == nil {
				t.Fatal("run.json has no environment.priority")
			}
			if !strings.Contains(out.String(), "\nPRIORITY  "+p.Summary+"\n") {
				t.Errorf("summary has no PRIORITY line %q:\n%s", p.Summary, out.String())
			}
			log, err := os.ReadFile(filepath.Join(opts.OutDir, "logs", "app-0.log"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.local != "" {
				if p.Mode != "same" || p.Cgroup != "" || !strings.Contains(p.Summary, "drill's own CPU weight") {
					t.Errorf("priority %+v", p)
				}
				if strings.Contains(string(log), "/drill-") {
					t.Errorf("replica placed in a cgroup with sutPriority same:\n%s", log)
				}
				return
			}
			switch p.Mode {
			case "cgroup-v1", "cgroup-v2":
				if len(p.Limits) != 1 || !p.Limits[0].Applied || p.Limits[0].QuotaMicros != 30000 || p.Limits[0].PeriodMicros != 100000 ||
					!strings.Contains(p.Summary, "replicas and dependencies in cgroup drill-"+opts.RunID) ||
					!strings.Contains(p.Summary, "app limited to 0.3 CPU per replica") {
					t.Errorf("priority %+v", p)
				}
				if want := "/drill-" + opts.RunID + "/app/app-0\n"; !strings.Contains(string(log), want) {
					t.Errorf("replica's cgroups do not end in %s:\n%s", want, log)
				}
				if _, err := os.Stat(p.Cgroup); !os.IsNotExist(err) {
					t.Errorf("cgroup %s still there after the run (%v)", p.Cgroup, err)
				}
			case "nice":
				if p.Nice != 5 || len(p.Limits) != 1 || p.Limits[0].Applied ||
					len(res.Record.Validity.Warnings) != 1 || !strings.Contains(res.Record.Validity.Warnings[0], "CPU limits not applied to app (300m)") {
					t.Errorf("priority %+v, warnings %q", p, res.Record.Validity.Warnings)
				}
			default:
				t.Errorf("mode %q", p.Mode)
			}
			if _, err := os.Stat(inject.JournalPath(opts.StateDir, opts.RunID)); !os.IsNotExist(err) {
				t.Errorf("journal of a clean run still there (%v)", err)
			}
		})
	}
}
