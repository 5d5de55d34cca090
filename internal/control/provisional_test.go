package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// TestLiveWindows feeds closed seconds to the console's running
// aggregates: a second counts in a window that holds it wholly, a window
// that moves after taking seconds is left to the run's end, and the
// verdict covers the seconds taken.
func TestLiveWindows(t *testing.T) {
	sec := func(at int, n int64, lat time.Duration) *measure.Bucket {
		b := measure.NewBucket(time.Duration(at)*time.Second, time.Second)
		for range n {
			b.Requests++
			b.OK++
			b.Codes[200]++
			b.Latency.Record(lat)
		}
		b.Intended = n
		return b
	}
	windows := func(faultStart, faultEnd time.Duration) *plan.Plan {
		return &plan.Plan{Duration: 20 * time.Second, Warmup: time.Second, Windows: []plan.Window{
			{Name: "run", Start: time.Second, End: 20 * time.Second},
			{Name: "baseline", Start: time.Second, End: faultStart},
			{Name: "fault:slow", Start: faultStart, End: faultEnd, Fault: "slow"},
		}}
	}
	maxLat := scenario.Duration{Duration: 20 * time.Millisecond}
	p50, ratio := scenario.Percentile(50), 2.0
	sc := &scenario.Scenario{Assertions: []scenario.Assertion{
		{Name: "p50", Type: scenario.AssertLatency, Stream: "s", Percentile: &p50, MaxLatency: &maxLat, Window: "fault:slow"},
		{Name: "iso", Type: scenario.AssertIsolation, Stream: "s", Window: "fault:slow", MaxP99Ratio: &ratio},
		{Name: "restarts", Type: scenario.AssertRestarts, Service: "x"},
	}}
	p := windows(5500*time.Millisecond, 10*time.Second)
	lw := newWindows(sc, p)
	if n := len(lw.aggs); n != 2 {
		t.Fatalf("%d aggregates, want 2 (fault:slow, baseline of stream s)", n)
	}
	for at := 1; at < 9; at++ {
		lat := time.Millisecond
		if at >= 6 {
			lat = 100 * time.Millisecond
		}
		lw.Add("s", sec(at, 10, lat))
		lw.Add("other", sec(at, 99, lat))
	}
	if agg := lw.aggs[windowKey{"s", "fault:slow"}]; agg.b == nil || agg.b.Requests != 30 || agg.from != 6*time.Second || agg.to != 9*time.Second {
		t.Fatalf("fault:slow took %+v; want seconds 6-8 of stream s (the second cut at 5.5 s left out)", agg)
	}
	var o Provisional
	lw.judge(p, sc.Assertions[0], "fault:slow", &o)
	if o.Verdict != "fail" || o.Through != 9*time.Second {
		t.Errorf("p50 on seconds 6-8: %+v; want fail through 9 s", o)
	}
	o = Provisional{Verdict: "pending"}
	lw.judge(p, sc.Assertions[1], "fault:slow", &o)
	if o.Verdict != "fail" {
		t.Errorf("isolation, baseline 1 ms vs window 100 ms: %+v; want fail", o)
	}

	// The operator ended the fault at 7.2 s, before seconds it holds.
	lw.replan(windows(5500*time.Millisecond, 7200*time.Millisecond))
	o = Provisional{Verdict: "pending"}
	lw.judge(p, sc.Assertions[0], "fault:slow", &o)
	if o.Verdict != "pending" || !strings.Contains(o.Message, "moved") {
		t.Errorf("after the window moved: %+v; want pending, moved", o)
	}

	// A window not yet measured, and no aggregates without such assertions.
	lw = newWindows(sc, windows(15*time.Second, 18*time.Second))
	o = Provisional{Verdict: "pending"}
	lw.judge(p, sc.Assertions[0], "fault:slow", &o)
	if o.Verdict != "pending" || !strings.Contains(o.Message, "no second") {
		t.Errorf("before any second closed: %+v", o)
	}
	if lw := newWindows(&scenario.Scenario{Assertions: sc.Assertions[2:]}, p); lw != nil {
		t.Errorf("aggregates for event-judged assertions only: %+v", lw)
	}
}

// TestProvisionalJudgesAsTheKindSpecSays: the console's verdicts so far
// follow each kind's declared live judging: a startup gate and restarts on
// the events so far, a stream's latency on its closed seconds (none kept
// here), recovery only when the run ends.
func TestProvisionalJudgesAsTheKindSpecSays(t *testing.T) {
	const svc, pod = "order-gateway", "order-gateway-0"
	sec := time.Second
	maxLat := scenario.Duration{Duration: 20 * time.Millisecond}
	within := scenario.Duration{Duration: 10 * time.Second}
	zero := 0
	sc := &scenario.Scenario{Assertions: []scenario.Assertion{
		{Name: "gate", Type: scenario.AssertStartupGate, Service: svc, Window: "run"},
		{Name: "restarts", Type: scenario.AssertRestarts, Service: svc, Max: &zero, Window: "run"},
		{Name: "p99", Type: scenario.AssertLatency, Stream: "orders", MaxLatency: &maxLat, Window: "run"},
		{Name: "recovers", Type: scenario.AssertRecovery, Stream: "orders", MaxLatency: &maxLat, Within: &within, Window: "run"},
	}}
	evlog := &event.Log{}
	for _, e := range []event.Event{
		{At: -10 * sec, Kind: event.PodStarted, Service: svc, Pod: pod},
		{At: -8 * sec, Kind: event.ProbeResult, Probe: event.ProbeStartup, Service: svc, Pod: pod, OK: false, Detail: "HTTP 503"},
		{At: -6 * sec, Kind: event.ProbeResult, Probe: event.ProbeStartup, Service: svc, Pod: pod, OK: true},
		{At: -6 * sec, Kind: event.PodReady, Service: svc, Pod: pod},
	} {
		evlog.Emit(e)
	}
	c := Start(context.Background(), Run{
		Scenario: sc,
		Plan:     &plan.Plan{Duration: 60 * sec, Warmup: sec, Windows: []plan.Window{{Name: "run", Start: sec, End: 60 * sec}}},
		Clock:    event.NewClockAt(time.Now().Add(-10 * sec)),
		Events:   evlog,
	})
	got := map[string]Provisional{}
	for _, p := range c.Provisional() {
		got[p.Name] = p
	}
	for _, want := range []struct {
		name, verdict, message string
	}{
		{"gate", "pass", "passed its startup gate"},
		{"restarts", "pass", ""},
		{"p99", "pending", "judged on the measured seconds when the run ends"},
		{"recovers", "pending", "judged when the run ends"},
	} {
		p, ok := got[want.name]
		switch {
		case !ok:
			t.Errorf("%s: no provisional verdict", want.name)
		case p.Verdict != want.verdict || !strings.Contains(p.Message, want.message) || !p.Provisional:
			t.Errorf("%s: %+v; want provisional %s, message with %q", want.name, p, want.verdict, want.message)
		}
	}
}

// TestLiveCheck: a check assertion is judged on the closed seconds so
// far, their check tallies merged.
func TestLiveCheck(t *testing.T) {
	p := &plan.Plan{Duration: 20 * time.Second, Warmup: time.Second, Windows: []plan.Window{{Name: "run", Start: time.Second, End: 20 * time.Second}}}
	sc := &scenario.Scenario{Assertions: []scenario.Assertion{{Name: "ra", Type: scenario.AssertCheck, Stream: "tax", Check: "retry-after-5", Window: "run"}}}
	lw := newWindows(sc, p)
	for at := 1; at < 4; at++ {
		b := measure.NewBucket(time.Duration(at)*time.Second, time.Second)
		b.Requests, b.Intended = 10, 10
		b.Codes[503] = 10
		c := measure.CheckCount{Applied: 10}
		if at == 3 {
			c.Failed = 1
			c.AddExample(measure.CheckFailure{At: 3 * time.Second, Status: 503, Reason: `Retry-After "7" != "5"`})
		}
		b.Checks = map[string]measure.CheckCount{"retry-after-5": c}
		lw.Add("tax", b)
	}
	o := Provisional{Verdict: "pending"}
	lw.judge(p, sc.Assertions[0], "run", &o)
	if o.Verdict != "fail" || !strings.Contains(o.Message, "1 of 30 responses failed") {
		t.Errorf("check on seconds 1-3: %+v; want fail, 1 of 30", o)
	}
}
