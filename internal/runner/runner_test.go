package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

func loadScenario(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "..", "testdata", "scenarios", "valid", name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return sc
}

func runOptions(t *testing.T, sc *scenario.Scenario, stdout *bytes.Buffer) Options {
	dir := t.TempDir()
	return Options{
		Scenario: sc,
		OutDir:   filepath.Join(dir, "out"),
		StateDir: filepath.Join(dir, "state"),
		Stdout:   stdout,
	}
}

// TestRunStubLatency runs a whole small drill on real parts (HTTP stub,
// embedded Toxiproxy, load engine) and checks the verdict, the reports and
// the order of the timeline's events.
func TestRunStubLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an 8 s drill")
	}
	a := runValid(t, func() (Options, *bytes.Buffer) {
		var out bytes.Buffer
		return runOptions(t, loadScenario(t, "stub-latency.yaml"), &out), &out
	})
	res, err, opts, out := a.res, a.err, a.opts, a.out
	if res.Record == nil {
		t.Fatalf("no record; code %d, err %v", res.Code, err)
	}
	if res.Code != exitcode.OK || err != nil {
		t.Fatalf("code %d, err %v\n%s", res.Code, err, out.String())
	}
	for _, f := range []string{"run.json", "junit.xml", "report.html"} {
		if _, err := os.Stat(filepath.Join(opts.OutDir, f)); err != nil {
			t.Errorf("report %s: %v", f, err)
		}
	}
	rec, err := record.Load(filepath.Join(opts.OutDir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Cleanup.Verified {
		t.Errorf("cleanup not verified: %+v", rec.Cleanup)
	}
	var kinds []string
	for _, e := range rec.Events {
		switch e.Kind {
		case event.FaultOn, event.FaultOff, event.PhaseStart:
			kinds = append(kinds, string(e.Kind)+":"+e.Fault+e.Detail)
		}
	}
	want := []string{"phase:load-start", "fault-on:slowlatency", "fault-off:slowscheduled", "phase:load-end"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("timeline events %v, want %v", kinds, want)
	}
	var on, off time.Duration
	for _, e := range rec.Events {
		if e.Kind == event.FaultOn {
			on = e.At
		}
		if e.Kind == event.FaultOff {
			off = e.At
		}
	}
	// Generous bounds: the fault is scheduled at 3 s for 3 s.
	if on < 3*time.Second || on > 4*time.Second || off-on < 2900*time.Millisecond || off-on > 4*time.Second {
		t.Errorf("fault on at %s, off at %s; want on at 3s for 3s", on, off)
	}
	if !strings.Contains(out.String(), "VERDICT: PASS") {
		t.Errorf("summary has no passing verdict:\n%s", out.String())
	}
}

// TestRunInterruptedRevertsFaults cancels the run while its fault is on and
// checks exit 3, the fault reverted (fault-off "end of run") and cleanup
// verified.
func TestRunInterruptedRevertsFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a drill")
	}
	var out bytes.Buffer
	opts := runOptions(t, loadScenario(t, "stub-latency.yaml"), &out)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// The fault is on from 3 s to 6 s after load starts (t=0, when OnLive
	// is called, however long bring-up took): interrupt at 4.5 s.
	opts.OnLive = func(*control.Control) {
		time.AfterFunc(4500*time.Millisecond, func() { cancel(errors.New("interrupted by test")) })
	}
	res, err := Run(ctx, opts)
	if res.Code != exitcode.CouldNotRun || exitcode.Code(err) != exitcode.CouldNotRun {
		t.Fatalf("code %d, err %v; want 3", res.Code, err)
	}
	if res.Record == nil {
		t.Fatal("no record for an interrupted run")
	}
	if !res.Record.Cleanup.Verified {
		t.Errorf("cleanup not verified: %+v", res.Record.Cleanup)
	}
	var sawOn bool
	for _, e := range res.Record.Events {
		if e.Kind == event.FaultOn {
			sawOn = true
		}
		if e.Kind == event.FaultOff && (!sawOn || e.Detail != "end of run") {
			t.Errorf("fault-off %q before or without fault-on", e.Detail)
		}
	}
	if !sawOn {
		t.Fatalf("no fault-on before the interrupt 4.5 s after load started (the fault is due at 3 s); events: %v", res.Record.Events)
	}
}

// TestRunRefusesBadInputBeforeTouching checks that a run with no scenario
// or a disallowed kubernetes context exits 2 and creates no report dir.
func TestRunRefusesBadInputBeforeTouching(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	res, err := Run(context.Background(), Options{StateDir: dir, Stdout: &out})
	if res.Code != exitcode.BadInput || err == nil {
		t.Fatalf("no scenario: code %d, err %v; want 2", res.Code, err)
	}

	sc := loadScenario(t, "kubernetes.yaml")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: production, context: {cluster: c, user: u, namespace: default}}]
current-context: production
`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := runOptions(t, sc, &out)
	opts.Kubeconfig = kubeconfig
	res, err = Run(context.Background(), opts)
	if res.Code != exitcode.BadInput {
		t.Fatalf("disallowed context: code %d, err %v; want 2", res.Code, err)
	}
	if _, statErr := os.Stat(opts.OutDir); !os.IsNotExist(statErr) {
		t.Errorf("report dir exists after a refused run: %v", statErr)
	}
}

// writeScenario writes a scenario into a temporary directory and loads it.
func writeScenario(t *testing.T, text string) *scenario.Scenario {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatalf("load scenario: %v", err)
	}
	return sc
}

// TestRunWithoutLoadRunsItsTimeline: a scenario with no stream still runs
// its whole timeline (here 3 s), so an assertion over its last second is
// judged on what was observed then, and the run's load-end event marks
// the end of the timeline, not the moment bring-up finished.
func TestRunWithoutLoadRunsItsTimeline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3 s drill")
	}
	sc := writeScenario(t, `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: no-load
timeline:
  duration: 3s
  windows:
    - name: last-second
      from: 2s
      to: 3s
dependencies:
  - name: exporter
    httpStub:
      contentType: text/plain; version=0.0.4
      body: "up 1\n"
observers:
  metrics:
    - name: exporter
      url: ${dependencies.exporter.url}/metrics
      interval: 200ms
assertions:
  - name: up-late
    type: metric
    metric: up
    op: "=="
    value: 1
    window: last-second
`)
	var out bytes.Buffer
	started := time.Now()
	res, err := Run(context.Background(), runOptions(t, sc, &out))
	took := time.Since(started)
	if res.Record == nil {
		t.Fatalf("no record; code %d, err %v", res.Code, err)
	}
	if res.Code != exitcode.OK || err != nil {
		t.Fatalf("code %d, err %v\n%s", res.Code, err, out.String())
	}
	if took < 3*time.Second {
		t.Errorf("the run took %s; want at least its 3 s timeline", took)
	}
	var end time.Duration
	var samplesLate int
	for _, e := range res.Record.Events {
		if e.Kind == event.PhaseStart && e.Detail == "load-end" {
			end = e.At
		}
		if e.Kind == event.Metric && e.At >= 2*time.Second && e.At < 3*time.Second {
			samplesLate++
		}
	}
	if end < 3*time.Second {
		t.Errorf("load-end at %s; want at or after the timeline's 3 s", end)
	}
	if samplesLate == 0 {
		t.Error("no metric sample in [2s, 3s): the observers did not run through the timeline")
	}
	if r := res.Record.Results[0]; r.Verdict != "pass" {
		t.Errorf("up-late: %s %s", r.Verdict, r.Message)
	}
}

// attempt is one run of a test drill: what Run returned, its summary and
// the options it ran with.
type attempt struct {
	res  Result
	err  error
	out  *bytes.Buffer
	opts Options
}

// runValid runs the drill that prepare sets up (fresh directories and
// scenario each time), once more when it comes back INVALID, and fails t
// with the validity message when it is INVALID twice (needs.ValidRun).
func runValid(t *testing.T, prepare func() (Options, *bytes.Buffer)) attempt {
	t.Helper()
	return needs.ValidRun(t, func(int) (attempt, string) {
		opts, out := prepare()
		res, err := Run(context.Background(), opts)
		a := attempt{res: res, err: err, out: out, opts: opts}
		if res.Code != exitcode.InvalidMeasurement {
			return a, ""
		}
		if res.Record != nil && !res.Record.Validity.Valid() {
			return a, res.Record.Validity.Summary()
		}
		return a, fmt.Sprintf("exit 4: %v", err)
	})
}
