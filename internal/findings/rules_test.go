package findings_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// run is a hand-made run: HEALTH-ORD-001's orders drill shape. 75 s, warmup
// 5 s, pg-pause on 20-35 s, recovery window 30 s, three order-gateway
// replicas (readiness period 5 s) routed by the local Service, one stream
// "orders" at 100 req/s answering 200 in 5 ms unless a case says otherwise.
type run struct {
	plan   *plan.Plan
	sc     *scenario.Scenario
	events []event.Event
	orders *measure.Series
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

var pods = []string{"order-gateway-0", "order-gateway-1", "order-gateway-2"}

func newRun() *run {
	p := &plan.Plan{Scenario: "orders", Duration: sec(75), Warmup: sec(5),
		Actions: []plan.Action{{At: sec(20), Kind: plan.FaultOn, Target: "pg-pause"}, {At: sec(35), Kind: plan.FaultOff, Target: "pg-pause"}},
		Windows: []plan.Window{
			{Name: "run", Start: sec(5), End: sec(75)},
			{Name: "baseline", Start: sec(5), End: sec(20)},
			{Name: "fault:pg-pause", Start: sec(20), End: sec(35), Fault: "pg-pause"},
			{Name: "recovery:pg-pause", Start: sec(35), End: sec(65), Fault: "pg-pause"},
		}}
	sc := &scenario.Scenario{
		Services: []scenario.Service{{Name: "order-gateway", Replicas: 3,
			Probes: scenario.Probes{ReadinessProbe: &scenario.Probe{PeriodSeconds: 5, FailureThreshold: 3, SuccessThreshold: 2}}}},
		Streams: []scenario.Stream{{Name: "orders", Targets: []scenario.Target{{URL: "${services.order-gateway.url}/orders"}}}},
	}
	r := &run{plan: p, sc: sc, orders: &measure.Series{Stream: "orders"}}
	for _, pod := range pods {
		r.route(-0.5, pod, true)
	}
	r.events = append(r.events,
		event.Event{At: 0, Kind: event.PhaseStart, Source: "run", Detail: "load-start"},
		event.Event{At: sec(20), Kind: event.FaultOn, Source: "run", Fault: "pg-pause"},
		event.Event{At: sec(35), Kind: event.FaultOff, Source: "run", Fault: "pg-pause"},
		event.Event{At: sec(75), Kind: event.PhaseStart, Source: "run", Detail: "load-end"})
	for s := 0; s < 75; s++ {
		b := measure.NewBucket(sec(float64(s)), time.Second)
		b.Intended, b.Requests, b.OK = 100, 100, 100
		b.Codes[200] = 100
		for i := 0; i < 100; i++ {
			measure.Record(b.Latency, 5*time.Millisecond)
		}
		r.orders.Buckets = append(r.orders.Buckets, b)
	}
	return r
}

// route records a replica entering (in) or leaving routing at t seconds:
// the pod's Ready condition and the local Service's endpoint.
func (r *run) route(t float64, pod string, in bool) {
	pk, ek := event.PodUnready, event.EndpointNotReady
	if in {
		pk, ek = event.PodReady, event.EndpointReady
	}
	r.events = append(r.events,
		event.Event{At: sec(t), Kind: pk, Source: "local-runtime", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(t), Kind: ek, Source: "local-runtime", Service: "order-gateway", Pod: pod})
}

// allOut takes every replica out of routing at from and back at to.
func (r *run) allOut(from, to float64) {
	for _, pod := range pods {
		r.route(from, pod, false)
		if to > 0 {
			r.route(to, pod, true)
		}
	}
}

// fail makes n requests of each second in [from, to) fail with code (an
// HTTP status) or, when code is 0, with the transport error kind.
func (r *run) fail(from, to int, n int64, code int, kind string) {
	for s := from; s < to; s++ {
		b := r.orders.Buckets[s]
		b.OK -= n
		b.Codes[200] -= n
		if code != 0 {
			b.Codes[code] += n
		} else {
			b.Errors[kind] += n
		}
	}
}

// slow makes every request of each second in [from, to) take d.
func (r *run) slow(from, to int, d time.Duration) {
	for s := from; s < to; s++ {
		b := r.orders.Buckets[s]
		b.Latency = measure.NewHist()
		for i := 0; i < 100; i++ {
			measure.Record(b.Latency, d)
		}
	}
}

func (r *run) restart(t float64, pod string) {
	r.events = append(r.events, event.Event{At: sec(t), Kind: event.ContainerRestart, Source: "local-runtime",
		Service: "order-gateway", Pod: pod, Container: "order-gateway", RestartCount: 1, Reason: "liveness probe failed"})
}

func (r *run) compute() []findings.Finding {
	return findings.Compute(findings.Input{Plan: r.plan, Scenario: r.sc, Events: r.events,
		Series: map[string]*measure.Series{"orders": r.orders}})
}

// ordersShape is the run of the orders drill on a fresh machine: readiness
// (period 5 s, failureThreshold 3) failed at 25.2, 30.2 and 35.0 s, so all
// three replicas left routing at t=35.0 s, the moment PostgreSQL came back,
// and returned at t=46.0 s; every request failed while none was routed.
func ordersShape() *run {
	r := newRun()
	r.allOut(35, 46)
	r.fail(20, 35, 95, 503, "")
	r.fail(35, 46, 100, 503, "")
	return r
}

// TestSeverityRules checks each documented severity rule on a hand-made
// event log: the finding it names is there with its severity, and runs
// that do not meet the rule do not carry it.
func TestSeverityRules(t *testing.T) {
	tests := []struct {
		name     string
		build    func() *run
		kind     findings.Kind
		severity findings.Severity
		rule     string
		text     string // a substring of the finding's text
	}{
		{"unroutable after the fault ended", ordersShape, findings.KindUnroutable, findings.Warning,
			findings.RuleUnroutableAfterFault, "order-gateway had no ready replica in the local Service for 11.0 s (t=35.0-46.0 s), from 0.0 s after pg-pause ended; 1,100 of 1,100 requests due in t=35-46 s failed"},
		{"unroutable only while the fault was on", func() *run {
			r := newRun()
			r.allOut(30, 34)
			r.fail(30, 34, 100, 503, "")
			return r
		}, findings.KindUnroutable, findings.Notice, findings.RuleUnroutableDuring, "for 4.0 s (t=30.0-34.0 s) while pg-pause was on"},
		{"unroutable until just after the fault ended", func() *run {
			r := newRun()
			r.allOut(30, 35.4)
			return r
		}, findings.KindUnroutable, findings.Notice, findings.RuleUnroutableDuring, "for 5.4 s (t=30.0-35.4 s) while pg-pause was on"},
		{"unroutable with no fault on", func() *run {
			r := newRun()
			r.allOut(10, 12)
			return r
		}, findings.KindUnroutable, findings.Warning, findings.RuleUnroutableNoFault, "while no fault was on"},
		{"detection at the fault's end", ordersShape, findings.KindDetection, findings.Warning,
			findings.RuleLateDetection, "did not react while pg-pause lasted (15.0 s): the first replica went unready 15.0 s after it began (3.0 readiness periods of 5.0 s)"},
		{"detection in the fault's last second", func() *run {
			r := newRun()
			r.allOut(34.6, 45)
			return r
		}, findings.KindDetection, findings.Warning, findings.RuleLateDetection, "first replica went unready 14.6 s after it began (2.9 readiness periods of 5.0 s), 0.4 s before it ended"},
		{"detection within the fault", func() *run {
			r := newRun()
			r.allOut(30.5, 40)
			return r
		}, findings.KindDetection, findings.Info, "", "order-gateway detected pg-pause in 10.5 s (2.1 readiness periods of 5.0 s)"},
		{"more errors after the fault than during it", func() *run {
			r := newRun()
			r.allOut(35, 46)
			r.fail(20, 35, 10, 503, "")
			r.fail(35, 46, 100, 503, "")
			return r
		}, findings.KindErrors, findings.Warning, findings.RuleErrorsAfter, "0 before, 150 during, 1,100 after it ended (88.0% of them after): more errors after"},
		{"errors after the fault, fewer than during", func() *run {
			r := newRun()
			r.fail(20, 35, 50, 503, "")
			r.fail(35, 37, 10, 0, measure.ErrTimeout)
			return r
		}, findings.KindErrors, findings.Notice, findings.RuleSomeErrorsAfter, "750 during, 20 after"},
		{"restart during the fault", func() *run {
			r := newRun()
			r.restart(28, "order-gateway-1")
			return r
		}, findings.KindRestarts, findings.Warning, findings.RuleRestartDuringFault, "restarted 1 time (1 during pg-pause)"},
		{"restarts before load", func() *run {
			r := newRun()
			r.restart(-12, "order-gateway-0")
			r.restart(-6, "order-gateway-2")
			return r
		}, findings.KindRestarts, findings.Warning, findings.RuleRestartBeforeLoad, "restarted 2 times (2 before load)"},
		{"restart in recovery", func() *run {
			r := newRun()
			r.restart(50, "order-gateway-0")
			return r
		}, findings.KindRestarts, findings.Notice, findings.RuleRestartOther, "1 after pg-pause"},
		{"crash loop", func() *run {
			r := newRun()
			r.restart(30, "order-gateway-0")
			r.events = append(r.events, event.Event{At: sec(31), Kind: event.K8sEvent, Service: "order-gateway",
				Pod: "order-gateway-0", Reason: "BackOff", Detail: "Back-off 10s restarting failed container"})
			return r
		}, findings.KindCrashLoop, findings.Warning, findings.RuleCrashLoop, "1 of 3 replicas of order-gateway entered CrashLoopBackOff, the first at t=31.0 s (during pg-pause)"},
		{"not recovered", func() *run {
			r := newRun()
			r.slow(20, 75, 900*time.Millisecond)
			return r
		}, findings.KindRecovery, findings.Warning, findings.RuleNotRecovered, "orders had not recovered 40.0 s after pg-pause ended"},
		{"recovered", func() *run {
			r := newRun()
			r.slow(20, 39, 900*time.Millisecond)
			return r
		}, findings.KindRecovery, findings.Info, "", "orders recovered 4.0 s after pg-pause ended (from t=39.0 s"},
		{"replicas that never came back", func() *run {
			r := newRun()
			r.route(25, "order-gateway-2", false)
			return r
		}, findings.KindRoutingLag, findings.Warning, findings.RuleNotReturned, "1 replica never came back before the run ended (order-gateway-2)"},
		{"a replica deleted and replaced", func() *run {
			r := newRun()
			r.route(25, "order-gateway-2", false)
			r.events = append(r.events, event.Event{At: sec(27), Kind: event.PodDeleted, Service: "order-gateway",
				Pod: "order-gateway-2", Reason: "deleted: fault pg-pause (pod-kill)"})
			return r
		}, findings.KindRoutingLag, findings.Info, "", "1 replica was deleted and replaced by a new pod (order-gateway-2)"},
		{"a claim the run contradicts", func() *run {
			r := ordersShape()
			r.sc.Claims = []scenario.Claim{{Name: "unready-at-35s", Source: "tutorial", Service: "order-gateway", Fault: "pg-pause",
				Figure: scenario.ClaimDetectionLast, Value: scenario.Duration{Duration: sec(5)}}}
			return r
		}, findings.KindClaim, findings.Notice, findings.RuleClaimMismatch,
			"claim unready-at-35s (tutorial): order-gateway detection-last 5.0 s after pg-pause began; measured 15.0 s (differs by +10.0 s, tolerance 1.0 s)"},
		{"a claim the run agrees with", func() *run {
			r := ordersShape()
			r.sc.Claims = []scenario.Claim{{Name: "back", Service: "order-gateway", Fault: "pg-pause",
				Figure: scenario.ClaimBackFirst, Value: scenario.Duration{Duration: sec(10.5)}}}
			return r
		}, findings.KindClaim, findings.Info, "", "measured 11.0 s (agrees, tolerance 1.0 s)"},
		{"a claim never measured", func() *run {
			r := newRun()
			r.sc.Claims = []scenario.Claim{{Name: "left", Service: "order-gateway", Fault: "pg-pause",
				Figure: scenario.ClaimLeftFirst, Value: scenario.Duration{Duration: sec(15)}}}
			return r
		}, findings.KindClaim, findings.Notice, findings.RuleClaimMismatch, "left-first 15.0 s after pg-pause began; measured: never"},
		{"dial timeouts are connection errors", func() *run {
			r := newRun()
			r.fail(20, 22, 10, 0, measure.ErrDialTimeout)
			return r
		}, findings.KindShedding, findings.Info, "", "20 of 1,500 requests failed (1.33%): 20 connection errors"},
		{"no restarts at all", newRun, findings.KindRestarts, findings.Info, "", "order-gateway: no restarts (bring-up included)"},
		{"shedding by kind", ordersShape, findings.KindShedding, findings.Info, "",
			"orders after pg-pause (t=35.0-65.0 s): 1,100 of 3,000 requests failed (36.7%): 1,100 answered 503 by the Service (no ready endpoint)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.build().compute()
			for _, f := range got {
				if f.Kind == tc.kind && strings.Contains(f.Text, tc.text) {
					if f.Severity != tc.severity || f.Rule != tc.rule {
						t.Errorf("severity %s rule %q, want %s %q: %s", f.Severity, f.Rule, tc.severity, tc.rule, f.Text)
					}
					return
				}
			}
			t.Errorf("no %s finding containing %q; got:\n%s", tc.kind, tc.text, dump(got))
		})
	}
}

// TestQuietRunHasNoConcern: a run where nothing went wrong has no warning
// and no notice.
func TestQuietRunHasNoConcern(t *testing.T) {
	for _, f := range newRun().compute() {
		if f.Severity != findings.Info {
			t.Errorf("%s %s: %s", f.Severity, f.Kind, f.Text)
		}
	}
}

// TestNoPlanNoFindings: a record without a plan has nothing to say.
func TestNoPlanNoFindings(t *testing.T) {
	if got := findings.Compute(findings.Input{}); got != nil {
		t.Errorf("got %v", got)
	}
}

// TestPure: computing twice gives the same answer and leaves the input
// alone (events out of order stay out of order).
func TestPure(t *testing.T) {
	r := ordersShape()
	r.events[0], r.events[len(r.events)-1] = r.events[len(r.events)-1], r.events[0]
	first := r.events[0]
	a, b := dump(r.compute()), dump(r.compute())
	if a != b {
		t.Errorf("two computations differ:\n%s\n%s", a, b)
	}
	if r.events[0].At != first.At || r.events[0].Kind != first.Kind {
		t.Error("Compute reordered its input")
	}
}

// TestGoldenOrdersShape pins every finding of the orders shape.
func TestGoldenOrdersShape(t *testing.T) {
	got := dump(ordersShape().compute())
	golden := filepath.Join("testdata", "orders-shape.findings.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("findings differ from %s:\n--- got\n%s--- want\n%s", golden, got, want)
	}
}

func dump(fs []findings.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(string(f.Severity) + "\t" + string(f.Kind) + "\t" + f.Rule + "\t" + f.Text + "\n")
	}
	return b.String()
}

// TestFaultOutlastingTheRun: a run stopped at t=30 s, inside its fault,
// says nothing about recovery (there was none to see) and cuts the fault's
// windows at the stop.
func TestFaultOutlastingTheRun(t *testing.T) {
	r := newRun()
	for i, e := range r.events {
		if e.Kind == event.PhaseStart && e.Detail == "load-end" {
			r.events[i].At = sec(30)
		}
	}
	r.fail(20, 30, 100, 503, "")
	for _, f := range r.compute() {
		if f.Kind == findings.KindRecovery {
			t.Errorf("a recovery finding for a fault still on at the run's end: %s", f.Text)
		}
		if f.Severity == findings.Warning {
			t.Errorf("warning: %s", f.Text)
		}
		if f.Kind == findings.KindShedding && !strings.Contains(f.Text, "(t=20.0-30.0 s)") {
			t.Errorf("shedding window not cut at the stop: %s", f.Text)
		}
	}
}

// TestOverlappingFaultsRecovery: a second fault that starts inside the
// first and ends after it. The first fault's end falls while the second is
// still on, so only the second has a recovery finding, never a negative
// time; the one it has is searched from its own end.
func TestOverlappingFaultsRecovery(t *testing.T) {
	for _, c := range []struct {
		name        string
		on, off     float64
		wantRecover []string // faults with a recovery finding
	}{
		{name: "overlapping, ends after the first", on: 30, off: 45, wantRecover: []string{"db-slow"}},
		{name: "nested inside the first", on: 25, off: 30, wantRecover: []string{"pg-pause"}},
		{name: "after the first", on: 40, off: 45, wantRecover: []string{"pg-pause", "db-slow"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun()
			r.plan.Actions = append(r.plan.Actions, plan.Action{At: sec(c.on), Kind: plan.FaultOn, Target: "db-slow"},
				plan.Action{At: sec(c.off), Kind: plan.FaultOff, Target: "db-slow"})
			r.events = append(r.events, event.Event{At: sec(c.on), Kind: event.FaultOn, Source: "run", Fault: "db-slow"},
				event.Event{At: sec(c.off), Kind: event.FaultOff, Source: "run", Fault: "db-slow"})
			r.slow(20, 75, 900*time.Millisecond)
			var got []string
			for _, f := range r.compute() {
				if f.Kind != findings.KindRecovery {
					continue
				}
				got = append(got, f.Fault)
				if strings.Contains(f.Text, " -") {
					t.Errorf("recovery finding with a negative time: %s", f.Text)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.wantRecover, ",") {
				t.Errorf("recovery findings for %v, want %v", got, c.wantRecover)
			}
		})
	}
}

// TestFailuresPerConnection: while no replica is ready, a Service that
// balances per request answers 503 itself, while one that balances per
// connection refuses new connections and its kept-alive connections still
// reach the replicas, whose 503s are their own. The fault finding says
// which it was.
func TestFailuresPerConnection(t *testing.T) {
	tests := []struct {
		name      string
		balancing scenario.Balancing
		fail      func(r *run)
		want      string
	}{
		{"per request", "", func(r *run) { r.fail(25, 35, 100, 503, "") },
			"1,000 answered 503 by the Service (no ready endpoint)"},
		{"per connection, refused", scenario.BalancingConnection, func(r *run) { r.fail(25, 35, 100, 0, measure.ErrRefused) },
			"1,000 refused by the Service (no ready endpoint for a new connection)"},
		{"per connection, kept-alive 503s", scenario.BalancingConnection, func(r *run) { r.fail(25, 35, 100, 503, "") },
			"1,000 shed with 503/429 by the service"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun()
			r.sc.Services[0].Balancing = tc.balancing
			r.allOut(25, 40)
			tc.fail(r)
			var text []string
			for _, f := range r.compute() {
				text = append(text, f.Text)
			}
			all := strings.Join(text, "\n")
			if !strings.Contains(all, tc.want) {
				t.Errorf("findings do not say %q:\n%s", tc.want, all)
			}
		})
	}
}

// TestPlatformFaultIsNoDetection: replicas a rollout takes out of routing
// are the fault's own doing, so there is no detection finding for it (a
// "detected in 15 s" would read as the service noticing a failing
// dependency); the routing finding still says when each left and whether
// it was replaced. The same log under a dependency fault keeps it.
func TestPlatformFaultIsNoDetection(t *testing.T) {
	for _, tc := range []struct {
		typ           scenario.FaultType
		wantDetection bool
	}{{scenario.FaultRollout, false}, {scenario.FaultPodKill, false}, {"latency", true}} {
		r := newRun()
		r.sc.Faults = []scenario.Fault{{Name: "pg-pause", Type: tc.typ}}
		r.route(25, pods[0], false)
		var detection, routed bool
		for _, f := range r.compute() {
			detection = detection || f.Kind == findings.KindDetection
			routed = routed || (f.Kind != findings.KindDetection && strings.Contains(f.Text, "left the local Service"))
		}
		if detection != tc.wantDetection || !routed {
			t.Errorf("%s: detection finding %t (want %t), routing finding %t (want true)", tc.typ, detection, tc.wantDetection, routed)
		}
	}
}

// TestPodFailures: for a platform fault, the requests that failed at the
// backend on each pod it deleted (the local Service's count on the pod's
// EndpointRemoved) are a notice naming each pod; none is an info line.
func TestPodFailures(t *testing.T) {
	for _, tc := range []struct {
		failed   float64
		severity findings.Severity
		text     string
	}{
		{75, findings.Notice, "75 requests to pods of order-gateway that roll deleted failed at the backend (answered 502 by the local Service) while they were being deleted: order-gateway-0 75 (deleted at t=25.0 s, left the Service 1.0 s later); 2 on other pods"},
		{0, findings.Info, "no request to the 1 pod of order-gateway that roll deleted failed at the backend"},
	} {
		r := newRun()
		r.sc.Faults = []scenario.Fault{{Name: "pg-pause", Type: scenario.FaultRollout}}
		for i := range r.plan.Actions {
			r.plan.Actions[i].Target = "roll"
		}
		for i := range r.events {
			if r.events[i].Fault == "pg-pause" {
				r.events[i].Fault = "roll"
			}
		}
		r.plan.Windows = append(r.plan.Windows, plan.Window{Name: "recovery:roll", Start: sec(35), End: sec(65), Fault: "roll"})
		r.sc.Faults[0].Name = "roll"
		detail := func(n float64) string {
			return fmt.Sprintf("endpoint removed; %d requests to it failed at the backend (answered 502)", int(n))
		}
		r.events = append(r.events,
			event.Event{At: sec(25), Kind: event.K8sEvent, Reason: "Killing", Service: "order-gateway", Pod: pods[0], Fault: "roll"},
			event.Event{At: sec(26), Kind: event.EndpointRemoved, Service: "order-gateway", Pod: pods[0], Value: tc.failed, Detail: detail(tc.failed)},
			event.Event{At: sec(27), Kind: event.EndpointRemoved, Service: "order-gateway", Pod: "order-gateway-9", Value: 2, Detail: detail(2)},
		)
		var got []findings.Finding
		for _, f := range r.compute() {
			if f.Kind == findings.KindPodFailures {
				got = append(got, f)
			}
		}
		if len(got) != 1 || got[0].Severity != tc.severity || !strings.HasPrefix(got[0].Text, tc.text) {
			t.Errorf("failed=%v: pod-failures findings %+v, want one %s: %q", tc.failed, got, tc.severity, tc.text)
		}
		if len(got) == 1 && strings.Contains(got[0].Text, "window ended") {
			t.Errorf("failed=%v: every pod left within the window, yet: %q", tc.failed, got[0].Text)
		}
	}
}

// TestPodFailuresAfterWindow: a pod the fault deleted just before its
// window ended and that left the Service after it failed requests due in
// the next window too; the finding says so, so that its count and the
// window's line need not agree.
func TestPodFailuresAfterWindow(t *testing.T) {
	r := newRun()
	r.sc.Faults = []scenario.Fault{{Name: "pg-pause", Type: scenario.FaultRollout}}
	detail := "endpoint removed; 25 requests to it failed at the backend (answered 502)"
	r.events = append(r.events,
		event.Event{At: sec(25), Kind: event.K8sEvent, Reason: "Killing", Service: "order-gateway", Pod: pods[0], Fault: "pg-pause"},
		event.Event{At: sec(25.5), Kind: event.EndpointRemoved, Service: "order-gateway", Pod: pods[0], Value: 25, Detail: detail},
		event.Event{At: sec(34.5), Kind: event.K8sEvent, Reason: "Killing", Service: "order-gateway", Pod: pods[1], Fault: "pg-pause"},
		event.Event{At: sec(35.5), Kind: event.EndpointRemoved, Service: "order-gateway", Pod: pods[1], Value: 25, Detail: detail},
	)
	var fd *findings.Finding
	all := r.compute()
	for i, f := range all {
		if f.Kind == findings.KindPodFailures {
			fd = &all[i]
		}
	}
	if fd == nil {
		t.Fatalf("no pod-failures finding in %+v", all)
	}
	want := "order-gateway-1 left the Service after pg-pause's window ended (35.0 s), so the 25 failures on it count partly after it"
	if !strings.Contains(fd.Text, "50 requests to pods") || !strings.Contains(fd.Text, want) {
		t.Errorf("finding %q does not say 50 requests and %q", fd.Text, want)
	}
	for _, f := range fd.Figures {
		if f.Name == "failed-on-pods-left-after-window" && f.Value != 25 {
			t.Errorf("figure %s = %v, want 25", f.Name, f.Value)
		}
	}
}
