package runner

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/scenario"
)

// writeScenario writes src (with {{dir}} replaced by dir) as a scenario
// file in dir and loads it.
func writeScenarioIn(t *testing.T, dir, src string) *scenario.Scenario {
	t.Helper()
	path := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(src, "{{dir}}", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return sc
}

// TestRunServiceSetupIndexAndCommand: a service's setup runs once before
// its replicas (they see what it wrote) with its output in
// logs/<service>-setup.log; the command and args are expanded ($$PORT
// reaches the shell as $PORT, ${...} is filled); each replica has its
// index in REPLICA_INDEX.
func TestRunServiceSetupIndexAndCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short drill")
	}
	src := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: setup-index
timeline:
  duration: 2s
# MARK's path is no secret; unlisted, it would read REDACTED in the logs.
redact: {allowEnv: [MARK]}
dependencies:
  - name: stub
    httpStub: {}
services:
  - name: app
    command: [sh, -c, 'echo "port=$$PORT index=$$REPLICA_INDEX stub=$1 setup=$(cat "$MARK")"; exec sleep 300', sh]
    args: ['${dependencies.stub.url}']
    env:
      MARK: '{{dir}}/setup-ran'
    replicas: 2
    setup:
      command: [sh, -c, 'echo "setup writes $$MARK"; echo once >> "$MARK"']
streams:
  - name: s
    targets:
      - url: ${dependencies.stub.url}/
    rate: 5/s
    # The stream only keeps the run going: this test is about setup, the
    # replica index and the command line. Ten requests are too few to judge
    # the generator by (one scheduled late beside other packages' builds is
    # 10 %), so a late request counts past 100 ms, and half of them may be.
    lagBudget: {late: 100ms, fraction: 0.5}
`
	var dir string
	a := runValid(t, func() (Options, *bytes.Buffer) {
		dir = t.TempDir()
		var out bytes.Buffer
		return runOptions(t, writeScenarioIn(t, dir, src), &out), &out
	})
	res, err, opts, out := a.res, a.err, a.opts, a.out
	if res.Code != exitcode.OK || res.Record == nil {
		t.Fatalf("code %d, err %v\n%s", res.Code, err, out.String())
	}
	logs := filepath.Join(opts.OutDir, "logs")
	setupLog, err := os.ReadFile(filepath.Join(logs, "app-setup.log"))
	if err != nil || !strings.Contains(string(setupLog), "setup writes "+filepath.Join(dir, "setup-ran")+"\n") {
		t.Errorf("setup log (%v):\n%s", err, setupLog)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "setup-ran")); string(b) != "once\n" {
		t.Errorf("setup ran %d times, want once", strings.Count(string(b), "once"))
	}
	// Each replica's port from the Service's endpoint events.
	ports := map[string]string{}
	iSetupDone, iFirstStart := -1, -1
	for i, e := range res.Record.Events {
		if e.Kind == event.EndpointReady {
			_, p, _ := net.SplitHostPort(e.Address)
			ports[e.Pod] = p
		}
		if e.Kind == event.Note && e.Service == "app" && strings.HasPrefix(e.Detail, "setup exited with code 0") {
			iSetupDone = i
		}
		if e.Kind == event.PodStarted && e.Service == "app" && iFirstStart < 0 {
			iFirstStart = i
		}
	}
	if iSetupDone < 0 || iFirstStart < iSetupDone || res.Record.Events[iSetupDone].At >= 0 {
		t.Errorf("setup end (event %d) not before the first replica start (event %d), before load", iSetupDone, iFirstStart)
	}
	stubURL := regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`)
	for i, pod := range []string{"app-0", "app-1"} {
		b, err := os.ReadFile(filepath.Join(logs, pod+".log"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^port=(\S*) index=(\S*) stub=(\S*) setup=(\S*)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Errorf("%s log has no port line:\n%s", pod, b)
			continue
		}
		if m[1] != ports[pod] || ports[pod] == "" {
			t.Errorf("%s: the shell read PORT=%q, the replica's port is %q", pod, m[1], ports[pod])
		}
		if m[2] != []string{"0", "1"}[i] {
			t.Errorf("%s: REPLICA_INDEX=%q", pod, m[2])
		}
		if !stubURL.MatchString(m[3]) {
			t.Errorf("%s: args not expanded: %q", pod, m[3])
		}
		if m[4] != "once" {
			t.Errorf("%s started before its setup finished (saw %q)", pod, m[4])
		}
	}
}

// TestRunServiceSetupFails: a setup that exits non-zero ends the run with
// exit 3 before any replica starts; the error names the service and shows
// the setup's last lines; everything started is torn down.
func TestRunServiceSetupFails(t *testing.T) {
	dir := t.TempDir()
	sc := writeScenarioIn(t, dir, `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: setup-fails
timeline:
  duration: 2s
dependencies:
  - name: stub
    httpStub: {}
services:
  - name: app
    command: [sh, -c, 'echo started > "$MARK"; exec sleep 300']
    env:
      MARK: '{{dir}}/replica-ran'
    setup:
      command: [sh, -c, 'echo "stub at $1"; echo "ERROR: duplicate key value" >&2; exit 3', sh]
      args: ['${dependencies.stub.addr}']
streams:
  - name: s
    targets:
      - url: ${dependencies.stub.url}/
    rate: 5/s
`)
	var out bytes.Buffer
	opts := runOptions(t, sc, &out)
	start := time.Now()
	res, err := Run(context.Background(), opts)
	if res.Code != exitcode.CouldNotRun || exitcode.Code(err) != exitcode.CouldNotRun {
		t.Fatalf("code %d, err %v; want 3", res.Code, err)
	}
	logPath := filepath.Join(opts.OutDir, "logs", "app-setup.log")
	for _, want := range []string{
		"service app not started: setup of service app failed: exited with code 3 (Error) after ",
		"(all of it in " + logPath + "):",
		"| ERROR: duplicate key value",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, serr := os.Stat(filepath.Join(dir, "replica-ran")); !os.IsNotExist(serr) {
		t.Errorf("a replica ran after its setup failed (%v)", serr)
	}
	if _, serr := os.Stat(filepath.Join(opts.OutDir, "logs", "app-0.log")); !os.IsNotExist(serr) {
		t.Errorf("a replica log exists after the setup failed (%v)", serr)
	}
	b, rerr := os.ReadFile(logPath)
	if rerr != nil {
		t.Fatal(rerr)
	}
	m := regexp.MustCompile(`stub at (127\.0\.0\.1:\d+)`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("setup log:\n%s", b)
	}
	if c, derr := net.DialTimeout("tcp", m[1], time.Second); derr == nil {
		_ = c.Close()
		t.Errorf("the stub dependency at %s still answers after the run", m[1])
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("took %s to give up", took)
	}
}

// TestRunStartupRestartsFail: replicas that crash while coming up (once
// each, then run and turn ready) make a restarts assertion over run fail,
// and the summary says what happened before load.
func TestRunStartupRestartsFail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short drill")
	}
	src := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: startup-restarts
timeline:
  duration: 2s
dependencies:
  - name: stub
    httpStub: {}
services:
  - name: app
    command: [sh, -c, 'm="{{dir}}/ran-$$REPLICA_INDEX"; if [ ! -f "$m" ]; then touch "$m"; echo "migration race lost"; exit 1; fi; touch "{{dir}}/ready-$$REPLICA_INDEX"; exec sleep 300']
    replicas: 2
    probes:
      readinessProbe:
        exec:
          command: [sh, -c, 'test -f "{{dir}}/ready-$REPLICA_INDEX"']
        periodSeconds: 1
streams:
  - name: s
    targets:
      - url: ${dependencies.stub.url}/
    rate: 5/s
assertions:
  - type: restarts
    service: app
    max: 0
`
	a := runValid(t, func() (Options, *bytes.Buffer) {
		var out bytes.Buffer
		return runOptions(t, writeScenarioIn(t, t.TempDir(), src), &out), &out
	})
	res, err, out := a.res, a.err, a.out
	if res.Code != exitcode.AssertionFailed || res.Record == nil {
		t.Fatalf("code %d, err %v; want 1\n%s", res.Code, err, out.String())
	}
	if r := res.Record.Results[0]; r.Figure.Text != "2 restarts" {
		t.Errorf("restarts-run: %s (%s)", r.Figure.Text, r.Message)
	}
	for _, want := range []string{
		"STARTUP   app: 2 restarts before load (app-0: 1, app-1: 1); first: container exited with code 1 (Error)",
		"FAIL     restarts-run",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
