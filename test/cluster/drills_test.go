package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
)

// k8sDrill is one drill of scenarios/k8s judged by its verdicts: the
// manifests to apply first (scenarios/k8s/manifests), the selector and
// Service of its pods, and a check of how the run went where the verdicts
// alone do not show it.
type k8sDrill struct {
	file      string // scenarios/k8s/<file>.yaml
	manifests []string
	selector  string
	service   string
	also      func(t *testing.T, e *clusterEnv, run *record.Run)
}

// TestRolloutPair: scenarios/k8s/orders-rollout.yaml (the correct build
// drains on SIGTERM) passes every assertion, exit 0; its naive twin (exits
// at once on SIGTERM) fails exactly no-errors-during-rollout, exit 1, as
// its expect.fail declares, with its failed requests in the rollout's
// window. Both rollouts complete (RolloutComplete before fault-off).
func TestRolloutPair(t *testing.T) {
	for _, d := range []k8sDrill{
		{file: "orders-rollout", manifests: []string{"order-gateway.yaml"},
			selector: "app=order-gateway", service: "order-gateway", also: rolloutCompleted},
		{file: "orders-rollout-naive", manifests: []string{"order-gateway-naive-build.yaml"},
			selector: "app=order-gateway-naive", service: "order-gateway-naive", also: rolloutCompleted},
	} {
		t.Run(d.file, func(t *testing.T) { runK8sDrill(t, d) })
	}
}

// runK8sDrill applies d's manifests, waits for 3 ready pods, runs the
// drill and judges it as test/drills judges its pairs: exit 0 when the
// scenario declares no expected failure, else exit 1 with exactly the
// declared assertions failing (run.json's verdicts); exit 4 (an invalid
// measurement) fails the test with drill's validity message.
func runK8sDrill(t *testing.T, d k8sDrill) {
	e := requireEnv(t)
	for _, m := range d.manifests {
		e.apply(t, m)
	}
	w := startWatch(t, e.cs, namespace, d.selector, d.service)
	w.waitReady(t, 3, 3*time.Minute)

	sc := e.scenario(t, d.file+".yaml", nil)
	s, err := scenario.Load(sc)
	if err != nil {
		t.Fatalf("load %s: %v", sc, err)
	}
	wantExit, declared := record.ExitPass, []string(nil)
	if s.Expect != nil && len(s.Expect.Fail) > 0 {
		wantExit, declared = record.ExitFail, s.Expect.Fail
	}
	r := e.runDrill(t, "--kubeconfig", e.kubeconfig, "--context", contextName, sc)
	t.Logf("drill run exit %d\n%s", r.code, r.summary())
	run := r.record(t)
	for _, res := range run.Results {
		t.Logf("%-5s %-26s %-16s bound %s", res.Verdict, res.Name, res.Figure.Text, res.Bound)
	}
	for _, f := range run.Findings {
		t.Logf("finding %s %s: %s", f.Severity, f.Kind, f.Text)
	}
	switch {
	case r.code == record.ExitInvalid:
		why := run.Validity.Summary()
		if run.Validity.Valid() {
			why = run.Error
		}
		t.Fatalf("drill exited 4: the measurement is invalid, so no verdict can be trusted: %s", why)
	case r.code != record.ExitPass && r.code != record.ExitFail:
		t.Fatalf("drill exited %d, want %d; stderr tail:\n%s", r.code, wantExit, r.stderrTail(30))
	case run.ExitCode != r.code:
		t.Errorf("run.json says exit %d, the process exited %d", run.ExitCode, r.code)
	}
	if r.code != wantExit {
		t.Errorf("drill exited %d (%s), want %d; results:\n%s", r.code, run.Error, wantExit, resultLines(run))
	}
	ex := run.Expectation()
	if !slices.Equal(ex.Declared, declared) {
		t.Errorf("run.json's plan declares %v to fail, the scenario %v", ex.Declared, declared)
	}
	if !ex.Right() {
		t.Errorf("wrong verdicts: %s; results:\n%s", ex, resultLines(run))
	}
	for _, ev := range run.Events {
		if ev.Kind == event.FaultError {
			t.Errorf("fault-error at %s: %s: %s", ev.At, ev.Fault, ev.Detail)
		}
	}
	if d.also != nil {
		d.also(t, e, run)
	}
}

func resultLines(run *record.Run) string {
	var b strings.Builder
	for _, r := range run.Results {
		fmt.Fprintf(&b, "  %-5s %s: %s\n", r.Verdict, r.Name, r.Message)
	}
	return b.String()
}

// faultEvents returns the times of run's events of kind for fault (and
// reason when not empty).
func faultEvents(run *record.Run, kind event.Kind, fault, reason string) []time.Duration {
	var out []time.Duration
	for _, ev := range run.Events {
		if ev.Kind == kind && ev.Fault == fault && (reason == "" || ev.Reason == reason) {
			out = append(out, ev.At)
		}
	}
	return out
}

// rolloutCompleted checks that the rollout fault's restart patch came
// before its RolloutComplete, and that before its fault-off: the
// Deployment replaced every pod inside the fault.
func rolloutCompleted(t *testing.T, _ *clusterEnv, run *record.Run) {
	t.Helper()
	restart := faultEvents(run, event.K8sEvent, "rollout", inject.ReasonRolloutStep)
	done := faultEvents(run, event.Note, "rollout", inject.ReasonRolloutDone)
	off := faultEvents(run, event.FaultOff, "rollout", "")
	if len(restart) == 0 || len(done) == 0 || len(off) == 0 {
		t.Fatalf("rollout: %d RolloutStep, %d RolloutComplete, %d fault-off events; want each", len(restart), len(done), len(off))
	}
	if restart[0] > done[0] || done[0] > off[0] {
		t.Errorf("rollout: restart patch at %s, RolloutComplete at %s, fault-off at %s: out of order", restart[0], done[0], off[0])
	}
	t.Logf("rollout: restart patch at %s, complete at %s (%.1f s)", restart[0], done[0], (done[0] - restart[0]).Seconds())
}
