package assert

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

type judgeCase struct {
	name    string
	events  []event.Event
	series  map[string]*measure.Series
	a       scenario.Assertion
	verdict Verdict
	// figure is the primary figure's text (exact) when set.
	figure string
	// value is the primary figure's value (within 0.5%: HDR histograms
	// report a bucket's highest equivalent value) when set.
	value *float64
	// contains must all appear in the message.
	contains []string
	// evidence must all appear in some evidence detail, pod or log line.
	evidence []string
	// extra must all appear among "name=text" of the extra figures.
	extra []string
}

func (c judgeCase) run(t *testing.T) {
	t.Helper()
	res := Judge(testPlan(), []scenario.Assertion{c.a}, c.events, c.series)
	if len(res) != 1 {
		t.Fatalf("got %d results, want 1", len(res))
	}
	r := res[0]
	if r.Verdict != c.verdict {
		t.Errorf("verdict = %s, want %s; message: %s", r.Verdict, c.verdict, r.Message)
	}
	if c.figure != "" {
		if r.Figure.Text != c.figure {
			t.Errorf("figure = %q, want %q", r.Figure.Text, c.figure)
		}
	}
	if c.value != nil && math.Abs(r.Figure.Value-*c.value) > 0.005*math.Abs(*c.value) {
		t.Errorf("figure value = %v, want %v", r.Figure.Value, *c.value)
	}
	for _, s := range c.contains {
		if !strings.Contains(r.Message, s) {
			t.Errorf("message %q lacks %q", r.Message, s)
		}
	}
	var ev strings.Builder
	for _, e := range r.Evidence {
		ev.WriteString(e.Pod + " " + e.Detail + " " + strings.Join(e.Logs, " | ") + "\n")
	}
	for _, s := range c.evidence {
		if !strings.Contains(ev.String(), s) {
			t.Errorf("evidence lacks %q:\n%s", s, ev.String())
		}
	}
	var ex []string
	for _, f := range r.Extra {
		ex = append(ex, f.Name+"="+f.Text)
	}
	for _, s := range c.extra {
		if !strings.Contains(strings.Join(ex, "\n"), s) {
			t.Errorf("extra figures lack %q: %v", s, ex)
		}
	}
}

func TestRestarts(t *testing.T) {
	jump := append(bringUp(), faultEvents()...)
	jump = append(jump, event.Event{At: 30 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-0", Container: "app", RestartCount: 2})
	inferred := append(bringUp(), faultEvents()...)
	inferred = append(inferred,
		event.Event{At: 24 * sec, Kind: event.ProbeResult, Service: "order-gateway", Pod: "og-2", Probe: event.ProbeReadiness, Detail: "readiness 503"},
		event.Event{At: 25 * sec, Kind: event.ProbeResult, Service: "order-gateway", Pod: "og-2", Probe: event.ProbeLiveness, Detail: "GET /health: 500"},
		event.Event{At: 26 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-2", Container: "app", RestartCount: 1},
	)
	replaced := append(bringUp(), faultEvents()...)
	replaced = append(replaced,
		event.Event{At: 28 * sec, Kind: event.PodDeleted, Service: "order-gateway", Pod: "og-0", Reason: "Evicted"},
		event.Event{At: 28500 * ms1, Kind: event.PodCreated, Service: "order-gateway", Pod: "og-3"},
	)
	byRollout := append(bringUp(), faultEvents()...)
	byRollout = append(byRollout,
		event.Event{At: 21 * sec, Kind: event.PodCreated, Service: "order-gateway", Pod: "og-0-r1", Fault: "rollout"},
		event.Event{At: 24 * sec, Kind: event.PodDeleted, Service: "order-gateway", Pod: "og-0", Fault: "rollout", Reason: "deleted: fault rollout"},
	)
	outside := append(bringUp(), event.Event{At: -5 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-0", RestartCount: 1})
	// Replicas racing to migrate crash while coming up: a crash loop on
	// og-0 (one failed start) and one crash of og-1, all before load.
	crashLoop := append(bringUp(),
		event.Event{At: -9 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-0", Container: "app", RestartCount: 1,
			Reason: "container exited with code 1 (Error)"},
		event.Event{At: -9 * sec, Kind: event.K8sEvent, Service: "order-gateway", Pod: "og-0", Reason: "BackOff"},
		event.Event{At: -7 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-0", Container: "app", RestartCount: 2},
		event.Event{At: -7 * sec, Kind: event.K8sEvent, Service: "order-gateway", Pod: "og-0", Reason: "Failed"},
		event.Event{At: -6 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-1", Container: "app", RestartCount: 1},
	)
	crashLoop = append(crashLoop, faultEvents()...)
	// A liveness kill 2 s into load, inside the 5 s warm-up.
	inWarmup := append(bringUp(), event.Event{At: 2 * sec, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-2",
		Container: "app", RestartCount: 1, Reason: "liveness probe failed"})
	inWarmup = append(inWarmup, faultEvents()...)
	run0 := scenario.Assertion{Type: scenario.AssertRestarts, Service: "order-gateway", Window: "run"}
	runNoStartup := run0
	runNoStartup.IncludeStartup = boolp(false)
	faultWithStartup := scenario.Assertion{Type: scenario.AssertRestarts, Service: "order-gateway", Window: "fault:db-pause",
		IncludeStartup: boolp(true)}
	max1 := scenario.Assertion{Type: scenario.AssertRestarts, Service: "order-gateway", Window: "fault:db-pause", Max: intp(1)}
	zero := scenario.Assertion{Type: scenario.AssertRestarts, Service: "order-gateway", Window: "fault:db-pause"}
	span := zero
	span.Window = "fault:db-pause..recovery:db-pause"

	for _, c := range []judgeCase{
		{name: "correct build: zero restarts", events: correctEvents(), a: zero, verdict: Pass,
			figure: "0 restarts", value: f64(0), contains: []string{"0 restarts of order-gateway in fault:db-pause", "bound <= 0 restarts"}},
		{name: "naive build: liveness restart named with phase, cause and logs", events: naiveEvents(), a: zero, verdict: Fail,
			figure: "1 restart", value: f64(1),
			contains: []string{"1 restart of order-gateway", "og-1", "liveness probe failed"},
			evidence: []string{"og-1 app restarted (restartCount 1) in fault:db-pause; cause: liveness probe failed",
				"last liveness probe failure at t=27.000s: GET /health: context deadline exceeded", "health: unhealthy"}},
		{name: "restartCount jump counts twice", events: jump, a: max1, verdict: Fail, figure: "2 restarts", value: f64(2)},
		{name: "cause inferred from the last failing liveness probe", events: inferred, a: zero, verdict: Fail,
			evidence: []string{"cause: liveness probe failed", "GET /health: 500"}},
		{name: "pod replaced counts as a restart", events: replaced, a: max1, verdict: Pass, figure: "1 restart",
			value: f64(1), evidence: []string{"og-0 pod deleted in fault:db-pause; reason: Evicted", "og-3 replacement pod created"},
			extra: []string{"pods replaced=1 pod"}},
		{name: "pods replaced by the run's own rollout are no restarts", events: byRollout, a: zero, verdict: Pass,
			figure: "0 restarts", value: f64(0), extra: []string{"pods replaced=0 pods", "pods replaced by faults=1 pod"}},
		{name: "restart during bring-up is outside the window", events: outside, a: zero, verdict: Pass, figure: "0 restarts", value: f64(0)},
		{name: "range window from fault start to recovery end", events: naiveEvents(), a: span, verdict: Fail, figure: "1 restart", value: f64(1)},
		{name: "restarts before load count over the run window by default", events: crashLoop, a: run0, verdict: Fail,
			figure: "3 restarts", value: f64(3), contains: []string{"3 restarts of order-gateway in run, 3 of them before load"},
			evidence: []string{"og-0 app restarted (restartCount 1) in bring-up; cause: container exited with code 1 (Error)",
				"og-1 app restarted (restartCount 1) in bring-up"},
			extra: []string{"before load=3 restarts", "pods replaced=0 pods"}},
		{name: "a restart in the warm-up counts over the run window", events: inWarmup, a: run0, verdict: Fail,
			figure: "1 restart", value: f64(1), contains: []string{"1 restart of order-gateway in run, 1 in the warm-up"},
			evidence: []string{"og-2 app restarted (restartCount 1) in warmup"}, extra: []string{"in warm-up=1 restart"}},
		{name: "a restart in the warm-up is outside a fault window", events: inWarmup, a: zero, verdict: Pass,
			figure: "0 restarts", value: f64(0)},
		{name: "pods created at bring-up are no restarts over run", events: correctEvents(), a: run0, verdict: Pass,
			figure: "0 restarts", value: f64(0)},
		{name: "includeStartup false leaves them out and says so", events: crashLoop, a: runNoStartup, verdict: Pass,
			figure: "0 restarts", contains: []string{"3 more restarts before load not counted (includeStartup is false)"}},
		{name: "includeStartup true adds them to another window", events: crashLoop, a: faultWithStartup, verdict: Fail,
			figure: "3 restarts", contains: []string{"in fault:db-pause, 3 of them before load"}},
		{name: "unobserved service is an error, not a pass", events: correctEvents(),
			a:       scenario.Assertion{Type: scenario.AssertRestarts, Service: "payment-core", Window: "run"},
			verdict: Error, contains: []string{`no pod events for service "payment-core"`, "services observed: order-gateway"}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestEndpointRemoval(t *testing.T) {
	a := scenario.Assertion{Type: scenario.AssertEndpointRemoval, Service: "order-gateway", Window: "fault:db-pause", MaxLatency: dur(2 * sec)}
	tight := a
	tight.MaxLatency = dur(100 * ms1)
	p50 := a
	p50.Percentile = pct(50)

	// A scripted drill: unready at t=20.000 s, out of its
	// EndpointSlice at t=20.400 s: removal latency 400 ms.
	scripted := append(bringUp(),
		event.Event{At: 19 * sec, Kind: event.FaultOn, Fault: "db-pause"},
		event.Event{At: 20 * sec, Kind: event.PodUnready, Service: "order-gateway", Pod: "og-0"},
		event.Event{At: 20400 * ms1, Kind: event.EndpointNotReady, Service: "order-gateway", Pod: "og-0"},
		event.Event{At: 35 * sec, Kind: event.FaultOff, Fault: "db-pause"},
	)
	early := append(bringUp(), faultEvents()...)
	early = append(early,
		event.Event{At: 21*sec - 3*ms1, Kind: event.EndpointNotReady, Service: "order-gateway", Pod: "og-0"},
		event.Event{At: 21 * sec, Kind: event.PodUnready, Service: "order-gateway", Pod: "og-0"},
	)
	noEP := []event.Event{
		{At: -sec, Kind: event.PodReady, Service: "order-gateway", Pod: "og-0"},
		{At: 21 * sec, Kind: event.PodUnready, Service: "order-gateway", Pod: "og-0"},
	}
	for _, c := range []judgeCase{
		{name: "correct build: p99 is the max of three pods", events: correctEvents(), a: a, verdict: Pass,
			figure: "400ms", value: f64(400),
			contains: []string{"p99 removal latency 400ms over 3 unready transitions of order-gateway (max 400ms); bound p99 <= 2.00s"},
			evidence: []string{"og-0 unready at t=21.500s, endpoint ready=false at t=21.900s: removal latency 400ms", "og-2 unready at t=21.700s"},
			extra: []string{"max=400ms", "detection=1.50s (db-pause on -> og-0 unready)",
				"return=1.40s (db-pause off -> 3 pods back in the slice)"}},
		{name: "p50 over pods", events: correctEvents(), a: p50, verdict: Pass, figure: "120ms", value: f64(120)},
		{name: "tight bound fails", events: correctEvents(), a: tight, verdict: Fail, figure: "400ms"},
		{name: "scripted drill: 400 ms", events: scripted, a: a, verdict: Pass, figure: "400ms", value: f64(400),
			extra: []string{"detection=1.00s"}},
		{name: "endpoint left before the unready event was seen: 0", events: early, a: a, verdict: Pass, figure: "0ms",
			evidence: []string{"already endpoint-not-ready (seen 3.00ms earlier)"}},
		{name: "naive routing: unready pod stays in the slice", events: naiveEvents(), a: a, verdict: Fail,
			contains: []string{"1 of 2 unready transitions of order-gateway never left the EndpointSlice (first: og-2 at t=22.000s)"},
			evidence: []string{"og-2 unready at t=22.000s but its endpoint never left the slice: the pod was ready again at t=23.000s (unready for 1.00s)"}},
		{name: "no endpoint observer is an error", events: noEP, a: a, verdict: Error, contains: []string{"no EndpointSlice events"}},
		{name: "no pod unready passes with a clear figure", events: append(bringUp(), faultEvents()...), a: a, verdict: Pass,
			figure: "no pod went unready"},
		{name: "missing bound", events: correctEvents(), a: scenario.Assertion{Type: scenario.AssertEndpointRemoval, Service: "order-gateway"},
			verdict: Error, contains: []string{"needs maxLatency"}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestStreamAssertions(t *testing.T) {
	series := map[string]*measure.Series{"orders": ordersSeries()}
	mixed := map[string]*measure.Series{"orders": mkSeries("orders", steady(10, bucketSpec{
		n: 100, lat: 5 * ms1, codes: map[int]int64{503: 5, 404: 3, 302: 1}, errs: map[string]int64{measure.ErrTimeout: 2},
	}))}
	short := map[string]*measure.Series{"orders": mkSeries("orders", steady(30, bucketSpec{n: 99, lat: 5 * ms1, missing: 1}))}
	errRate := func(class string, max float64) scenario.Assertion {
		return scenario.Assertion{Type: scenario.AssertErrorRate, Stream: "orders", Window: "run", StatusClass: class, MaxRate: f64(max)}
	}
	for _, c := range []judgeCase{
		{name: "latency p99 outside the fault", series: series, verdict: Pass, figure: "10.0ms", value: f64(10),
			a:        scenario.Assertion{Type: scenario.AssertLatency, Stream: "orders", Window: "baseline", MaxLatency: dur(50 * ms1)},
			contains: []string{"orders p99 of 10.0ms over 1500 requests in baseline; bound p99 <= 50.0ms"},
			extra:    []string{"max=80.1ms", "requests=1500 requests"}},
		{name: "latency p99 during the fault", series: series, verdict: Fail, figure: "900ms", value: f64(900),
			a: scenario.Assertion{Type: scenario.AssertLatency, Stream: "orders", Window: "fault:db-pause", MaxLatency: dur(250 * ms1)}},
		{name: "latency p50", series: series, verdict: Pass, figure: "12.0ms",
			a: scenario.Assertion{Type: scenario.AssertLatency, Stream: "orders", Window: "fault:db-pause", Percentile: pct(50), MaxLatency: dur(20 * ms1)}},
		{name: "latency unknown stream", series: series, verdict: Error, contains: []string{`no measurements for stream "tax"; streams measured: orders`},
			a: scenario.Assertion{Type: scenario.AssertLatency, Stream: "tax", MaxLatency: dur(ms1)}},
		{name: "latency empty window", series: short, verdict: Error, contains: []string{"completed no requests in recovery:db-pause"},
			a: scenario.Assertion{Type: scenario.AssertLatency, Stream: "orders", Window: "recovery:db-pause", MaxLatency: dur(ms1)}},
		{name: "error rate over a window the stream sent nothing in", series: short, verdict: Error, contains: []string{"it sent nothing there"},
			a: scenario.Assertion{Type: scenario.AssertErrorRate, Stream: "orders", Window: "recovery:db-pause", MaxRate: f64(0)}},
		{name: "error rate 5xx", series: mixed, a: errRate("5xx", 0.05), verdict: Pass, figure: "5.00% (25/500)",
			contains: []string{"503: 25", "timeout: 10"}},
		{name: "error rate 4xx", series: mixed, a: errRate("4xx", 0.01), verdict: Fail, figure: "3.00% (15/500)"},
		{name: "error rate transport errors", series: mixed, a: errRate("errors", 0.01), verdict: Fail, figure: "2.00% (10/500)"},
		{name: "error rate non-2xx", series: mixed, a: errRate("non-2xx", 0.2), verdict: Pass, figure: "11.0% (55/500)"},
		{name: "error rate any (default)", series: mixed, a: errRate("", 0.1), verdict: Pass, figure: "10.0% (50/500)"},
		{name: "error rate unknown class", series: mixed, a: errRate("6xx", 0.1), verdict: Error, contains: []string{`unknown status class "6xx"`}},
		{name: "throughput short of the schedule", series: short, verdict: Fail, figure: "0.9900 (1485/1500)",
			a:     scenario.Assertion{Type: scenario.AssertThroughput, Stream: "orders", Window: "baseline"},
			extra: []string{"achieved=99.0/s", "intended=100.0/s"}},
		{name: "throughput with a lower bound", series: short, verdict: Pass,
			a: scenario.Assertion{Type: scenario.AssertThroughput, Stream: "orders", Window: "baseline", MinRatio: f64(0.98)}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestShed(t *testing.T) {
	spec := steady(60, bucketSpec{n: 150, lat: 3 * ms1})
	for i := 20; i < 35; i++ {
		spec[i] = bucketSpec{n: 150, lat: 3 * ms1, codes: map[int]int64{503: 140}, shed: 140, shedLat: 2 * ms1, shedRA: 140}
	}
	good := map[string]*measure.Series{"tax": mkSeries("tax", spec)}
	spec2 := append([]bucketSpec(nil), spec...)
	spec2[25].shedRA = 100
	spec2[26].shed, spec2[26].shedLat = 140, 40*ms1
	spec2[26].codes = map[int]int64{503: 70, 429: 70}
	bad := map[string]*measure.Series{"tax": mkSeries("tax", spec2)}
	a := scenario.Assertion{Type: scenario.AssertShed, Stream: "tax", Window: "fault:db-pause", MaxLatency: dur(5 * ms1), RetryAfter: boolp(true)}
	for _, c := range []judgeCase{
		{name: "fast shed with Retry-After", series: good, a: a, verdict: Pass, figure: "2.00ms", value: f64(2),
			contains: []string{"tax shed 2100 responses (503: 2100, 429: 0) in fault:db-pause, p99 2.00ms", "every one carried Retry-After"},
			extra:    []string{"with Retry-After=2100/2100"}},
		{name: "slow shed and missing Retry-After", series: bad, a: a, verdict: Fail, figure: "40.0ms",
			contains: []string{"40 of 2100 shed responses lacked Retry-After"},
			evidence: []string{"40 shed responses without Retry-After"}},
		{name: "nothing shed fails", series: good, a: func() scenario.Assertion { b := a; b.Window = "baseline"; return b }(),
			verdict: Fail, figure: "nothing shed", contains: []string{"no shed responses"}},
		{name: "unsupported status", series: good, a: func() scenario.Assertion { b := a; b.Status = []int{500}; return b }(),
			verdict: Error, contains: []string{"503 and 429 responses only"}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestIsolation(t *testing.T) {
	series := map[string]*measure.Series{"orders": ordersSeries()}
	a := scenario.Assertion{Type: scenario.AssertIsolation, Stream: "orders", Window: "fault:db-pause", MaxP99Ratio: f64(1.5), MaxErrorRateDelta: f64(0.01)}
	loose := a
	loose.MaxP99Ratio, loose.MaxErrorRateDelta = f64(100), f64(0.1)
	for _, c := range []judgeCase{
		{name: "blast radius too wide", series: series, a: a, verdict: Fail, figure: "p99 89.95x, error rate +5 pp",
			contains: []string{"orders p99 900ms in fault:db-pause vs 10.0ms in baseline (89.95x)", "error rate 5.00% vs 0%"},
			extra:    []string{"baseline p99=10.0ms", "window error rate=5.00%"}},
		{name: "within loose bounds", series: series, a: loose, verdict: Pass},
	} {
		t.Run(c.name, c.run)
	}
}

// workers returns samples of bulkhead_active_workers{lane} once a second.
func workers(lane string, vals map[int]float64, from, to int, dflt float64) []event.Event {
	var evs []event.Event
	for s := from; s < to; s++ {
		v, ok := vals[s]
		if !ok {
			v = dflt
		}
		evs = append(evs, event.Event{At: time.Duration(s)*sec + 300*ms1, Kind: event.Metric, Source: "scrape",
			Metric: "bulkhead_active_workers", Labels: map[string]string{"lane": lane, "instance": "pc-0"}, Value: v})
	}
	return evs
}

func TestMetricAndRecovery(t *testing.T) {
	// tax lane: 15 active during the fault, then 12, 4, 6, 3, 3, 3...
	tax := map[int]float64{}
	for s := 20; s < 36; s++ {
		tax[s] = 15
	}
	tax[36], tax[37], tax[38] = 12, 4, 6
	evs := append(faultEvents(), workers("tax_calc", tax, 0, 60, 3)...)
	evs = append(evs, workers("card_auth", nil, 0, 60, 40)...)

	never := map[int]float64{}
	for s := 20; s < 60; s++ {
		never[s] = 15
	}
	stuck := append(faultEvents(), workers("tax_calc", never, 0, 60, 3)...)

	rec := scenario.Assertion{Type: scenario.AssertRecovery, Window: "recovery:db-pause", Metric: "bulkhead_active_workers",
		Labels: map[string]string{"lane": "tax_calc"}, Op: "<", Value: f64(5), Within: dur(5 * sec)}
	strict := rec
	strict.Within = dur(2 * sec)
	streamRec := scenario.Assertion{Type: scenario.AssertRecovery, Window: "recovery:db-pause", Stream: "orders",
		MaxLatency: dur(100 * ms1), MaxRate: f64(0.01), Within: dur(5 * sec)}
	metric := scenario.Assertion{Type: scenario.AssertMetric, Window: "baseline", Metric: "bulkhead_active_workers",
		Labels: map[string]string{"lane": "tax_calc"}, Op: "<=", Value: f64(5)}
	metricFault := metric
	metricFault.Window = "fault:db-pause"
	series := map[string]*measure.Series{"orders": ordersSeries()}

	for _, c := range []judgeCase{
		{name: "tax lane recovers in time, figure reported", events: evs, a: rec, verdict: Pass, figure: "4.30s", value: f64(4299),
			contains: []string{`bulkhead_active_workers{lane="tax_calc"} recovered 4.30s after db-pause off (at t=39.300s), held for 2.00s`,
				`bound <= 5.00s (bulkhead_active_workers{lane="tax_calc"} < 5, held 2.00s)`}},
		{name: "recovery slower than within", events: evs, a: strict, verdict: Fail, figure: "4.30s"},
		{name: "never recovers", events: stuck, a: rec, verdict: Fail, figure: "> 10.00s (not recovered)",
			contains: []string{"did not recover after db-pause off (t=35.001s) by the end of recovery:db-pause"}},
		{name: "stream recovery from 1 s buckets", events: faultEvents(), series: series, a: streamRec, verdict: Pass, figure: "2.00s",
			contains: []string{"orders recovered 2.00s after db-pause off (at t=37.000s)"}},
		{name: "stream recovery when the stream sent nothing after the fault is an error", events: faultEvents(), a: streamRec, verdict: Error,
			series:   map[string]*measure.Series{"orders": mkSeries("orders", steady(30, bucketSpec{n: 100, lat: 5 * ms1}))},
			contains: []string{`stream "orders" sent nothing in recovery:db-pause after db-pause ended (t=35.001s): nothing to judge`}},
		{name: "metric holds in baseline", events: evs, a: metric, verdict: Pass, figure: "3 (worst, at t=5.300s)",
			extra: []string{"samples=15 samples", "violations=0 violations"}},
		{name: "metric broken in the fault", events: evs, a: metricFault, verdict: Fail, figure: "15 (worst, at t=20.300s)",
			evidence: []string{`bulkhead_active_workers{instance="pc-0",lane="tax_calc"} = 15`}},
		{name: "== reports the sample farthest from the value", events: evs, a: func() scenario.Assertion {
			// In the recovery the tax lane reads 12, 4, 6, then 3: the first
			// sample off 12 is 4, the farthest 3.
			m := metric
			m.Window, m.Op, m.Value = "recovery:db-pause", "==", f64(12)
			return m
		}(), verdict: Fail, figure: "3 (worst, at t=39.300s)"},
		{name: "metric with no samples is an error", events: evs, verdict: Error,
			a:        func() scenario.Assertion { m := metric; m.Labels = map[string]string{"lane": "fraud_eval"}; return m }(),
			contains: []string{`no samples of bulkhead_active_workers{lane="fraud_eval"} in baseline`}},
		{name: "bad op", events: evs, verdict: Error, a: func() scenario.Assertion { m := metric; m.Op = "=~"; return m }(),
			contains: []string{`unknown op "=~"`}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestFlapsAndReady(t *testing.T) {
	flappy := append(bringUp(), faultEvents()...)
	for i := 0; i < 3; i++ {
		at := 22*sec + time.Duration(i)*2*sec
		flappy = append(flappy,
			event.Event{At: at, Kind: event.PodUnready, Service: "order-gateway", Pod: "og-1"},
			event.Event{At: at + sec, Kind: event.PodReady, Service: "order-gateway", Pod: "og-1"},
			event.Event{At: at + sec + ms1, Kind: event.PodReady, Service: "order-gateway", Pod: "og-1"}, // repeated: no transition
		)
	}
	flaps := scenario.Assertion{Type: scenario.AssertFlaps, Service: "order-gateway", Window: "fault:db-pause", Max: intp(2)}
	ready := scenario.Assertion{Type: scenario.AssertReady, Service: "order-gateway", Window: "recovery:db-pause"}
	readyFault := ready
	readyFault.Window = "fault:db-pause"
	readyMin := readyFault
	readyMin.MinReady = intp(0)
	for _, c := range []judgeCase{
		{name: "hysteresis: one unready and one ready per pod", events: correctEvents(),
			a: func() scenario.Assertion { f := flaps; f.Window = "run"; return f }(), verdict: Pass, figure: "2 transitions"},
		{name: "flapping pod", events: flappy, a: flaps, verdict: Fail, figure: "6 transitions", value: f64(6),
			evidence: []string{"og-1 6 transitions: unready@22.000s ready@23.000s unready@24.000s"}},
		{name: "all replicas ready again after the pause", events: correctEvents(), a: ready, verdict: Pass, figure: "3/3 ready", value: f64(3)},
		{name: "replicas unready at the end of the fault", events: correctEvents(), a: readyFault, verdict: Fail, figure: "0/3 ready",
			evidence: []string{"og-0 not ready at the end of fault:db-pause"}},
		{name: "minReady 0", events: correctEvents(), a: readyMin, verdict: Pass},
	} {
		t.Run(c.name, c.run)
	}
}

func TestJudgeErrors(t *testing.T) {
	res := Judge(testPlan(), []scenario.Assertion{
		{Type: "latnecy", Stream: "orders"},
		{Type: scenario.AssertLatency, Stream: "orders", Window: "fault:typo", MaxLatency: dur(ms1)},
	}, nil, nil)
	if res[0].Verdict != Error || !strings.Contains(res[0].Message, `unknown assertion type "latnecy"; available: check, detection, endpoint-removal, error-rate, flaps`) {
		t.Errorf("unknown type: %+v", res[0])
	}
	if res[0].Name != "latnecy-run" {
		t.Errorf("default name = %q", res[0].Name)
	}
	want := `window "fault:typo" is not in the plan; available: baseline, fault:db-pause, recovery:db-pause, run`
	if res[1].Verdict != Error || res[1].Message != want {
		t.Errorf("unknown window: %q", res[1].Message)
	}
	if got := Judge(nil, []scenario.Assertion{{Type: scenario.AssertLatency}}, nil, nil); got[0].Verdict != Error {
		t.Errorf("nil plan: %+v", got[0])
	}
}

func TestJudgeIsPure(t *testing.T) {
	evs := naiveEvents()
	before, _ := json.Marshal(evs)
	as := []scenario.Assertion{{Type: scenario.AssertRestarts, Service: "order-gateway", Window: "run"}}
	a := Judge(testPlan(), as, evs, nil)
	b := Judge(testPlan(), as, evs, nil)
	after, _ := json.Marshal(evs)
	if string(before) != string(after) {
		t.Error("Judge changed its input events")
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Error("Judge is not deterministic")
	}
}

// TestGoldenResults renders a full judgement of the correct and the naive
// runs as JSON and compares it with testdata/*.golden.json (-update
// rewrites them).
func TestGoldenResults(t *testing.T) {
	as := []scenario.Assertion{
		{Name: "no-restarts", Type: scenario.AssertRestarts, Service: "order-gateway", Window: "fault:db-pause..recovery:db-pause", Source: "HEALTH-ORD-001 MC-FD-01"},
		{Name: "fast-removal", Type: scenario.AssertEndpointRemoval, Service: "order-gateway", Window: "fault:db-pause", MaxLatency: dur(2 * sec)},
		{Name: "baseline-p99", Type: scenario.AssertLatency, Stream: "orders", Window: "baseline", MaxLatency: dur(50 * ms1)},
		{Name: "errors", Type: scenario.AssertErrorRate, Stream: "orders", Window: "run", MaxRate: f64(0.01)},
		{Name: "ready-after", Type: scenario.AssertReady, Service: "order-gateway", Window: "recovery:db-pause"},
		{Name: "no-flaps", Type: scenario.AssertFlaps, Service: "order-gateway", Window: "run", Max: intp(2)},
	}
	series := map[string]*measure.Series{"orders": ordersSeries()}
	for name, evs := range map[string][]event.Event{"correct": correctEvents(), "naive": naiveEvents()} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(Judge(testPlan(), as, evs, series)); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name+".golden.json"), buf.Bytes(), *update)
		})
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"}, {850 * time.Microsecond, "850µs"}, {4200 * time.Microsecond, "4.20ms"},
		{41 * ms1, "41.0ms"}, {412 * ms1, "412ms"}, {1250 * ms1, "1.25s"}, {125 * sec, "2m05.00s"}, {-3 * ms1, "-3.00ms"},
	} {
		if got := FormatDuration(c.d); got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		r    float64
		want string
	}{{0, "0%"}, {0.0012, "0.12%"}, {0.000036, "0.0036%"}, {0.125, "12.5%"}, {1, "100.0%"}} {
		if got := FormatPercent(c.r); got != c.want {
			t.Errorf("FormatPercent(%v) = %q, want %q", c.r, got, c.want)
		}
	}
}

// TestJudgeRouting covers the unroutable and detection assertions on the
// fixture logs: the correct build leaves routing at t=21.9 s and returns
// from t=36.003 s (14.1 s with no ready endpoint, 1.0 s of it after the
// pause ended); the naive build keeps og-0 routed throughout.
func TestJudgeRouting(t *testing.T) {
	unroutable := func(max time.Duration, after bool) scenario.Assertion {
		a := scenario.Assertion{Type: scenario.AssertUnroutable, Service: "order-gateway", MaxDuration: dur(max)}
		if after {
			a.AfterFaultEnd = boolp(true)
			a.Fault = "db-pause"
		}
		return a
	}
	detection := func(max time.Duration, window string, p *scenario.Percentile) scenario.Assertion {
		return scenario.Assertion{Type: scenario.AssertDetection, Service: "order-gateway", Window: window,
			MaxDuration: dur(max), Fault: "db-pause", Percentile: p}
	}
	for _, c := range []judgeCase{
		{name: "unroutable within bound", events: correctEvents(), a: unroutable(15*sec, false), verdict: Pass,
			figure: "14.10s", contains: []string{"no ready replica in the EndpointSlice for 14.10s at most"},
			evidence: []string{"from t=21.900s to t=36.003s"}},
		{name: "unroutable beyond bound", events: correctEvents(), a: unroutable(10*sec, false), verdict: Fail, figure: "14.10s"},
		{name: "unroutable after the fault ended", events: correctEvents(), a: unroutable(500*ms1, true), verdict: Fail,
			figure: "1.00s", contains: []string{"after db-pause ended (t=35.001s)"}},
		{name: "always routable", events: naiveEvents(), a: unroutable(0, false), verdict: Pass, figure: "0s (always routable)"},
		{name: "detection of the last replica", events: correctEvents(), a: detection(2*sec, "run", nil), verdict: Pass,
			figure: "1.70s", extra: []string{"first=1.50s", "last=1.70s"}},
		{name: "detection too slow", events: correctEvents(), a: detection(sec, "run", nil), verdict: Fail, figure: "1.70s"},
		{name: "a replica never detected", events: naiveEvents(), a: detection(10*sec, "fault:db-pause", nil), verdict: Fail,
			figure: "never", evidence: []string{"og-0 never went unready"}},
		{name: "median replica detected", events: naiveEvents(), a: detection(10*sec, "fault:db-pause", pct(50)), verdict: Pass,
			figure: "2.00s"},
	} {
		t.Run(c.name, c.run)
	}
}

// TestReturn: the correct fixture's replicas come back 1.00 s, 1.20 s and
// 1.40 s after the pause ended; the return assertion holds the first to
// minDuration (the hysteresis of MC-FD-01.2) and the last to maxDuration.
func TestReturn(t *testing.T) {
	ret := func(min, max time.Duration) scenario.Assertion {
		a := scenario.Assertion{Type: scenario.AssertReturn, Service: "order-gateway", Window: "recovery:db-pause", Fault: "db-pause"}
		if min > 0 {
			a.MinDuration = dur(min)
		}
		if max > 0 {
			a.MaxDuration = dur(max)
		}
		return a
	}
	noneOut := append(bringUp(), faultEvents()...)
	for _, c := range []judgeCase{
		{name: "within both bounds", events: correctEvents(), a: ret(sec, 5*sec), verdict: Pass,
			figure: "first 1.00s, last 1.40s", extra: []string{"first=1.00s", "last=1.40s", "replicas back=3 replicas"},
			contains: []string{"3 replicas of order-gateway came back 1.00s to 1.40s after db-pause ended; bound first >= 1.00s, last <= 5.00s after db-pause ended"},
			evidence: []string{"og-2 back in routing at t=36.403s"}},
		{name: "back sooner than the hysteresis allows", events: correctEvents(), a: ret(2*sec, 0), verdict: Fail,
			figure: "first 1.00s, last 1.40s"},
		{name: "the last one too late", events: correctEvents(), a: ret(0, 1300*ms1), verdict: Fail},
		{name: "a replica never back", events: naiveEvents(), a: ret(0, 5*sec), verdict: Fail, figure: "never",
			contains: []string{"none of the 1 replica of order-gateway out of routing when db-pause ended came back"},
			evidence: []string{"og-1"}},
		{name: "nothing out of routing at the fault's end", events: noneOut, a: ret(sec, 0), verdict: Error,
			contains: []string{"no replica of order-gateway was out of routing when db-pause ended"}},
		{name: "no bound", events: correctEvents(), a: ret(0, 0), verdict: Error,
			contains: []string{"needs minDuration or maxDuration"}},
	} {
		t.Run(c.name, c.run)
	}
}

// TestWindowsCutShortAreAborted: when the run's timeline stopped early (its
// load-end event comes before a window's end), that window is not judged
// (verdict aborted, never pass), while windows that ended before the stop
// are judged as usual; a log without the event judges every window.
func TestWindowsCutShortAreAborted(t *testing.T) {
	stopAt := func(at time.Duration) []event.Event {
		return append(correctEvents(), event.Event{At: at, Kind: event.PhaseStart, Source: "run", Detail: LoadEndDetail})
	}
	ready := scenario.Assertion{Type: scenario.AssertReady, Service: "order-gateway", Window: "recovery:db-pause"}
	restarts := scenario.Assertion{Type: scenario.AssertRestarts, Service: "order-gateway", Window: "baseline", Max: intp(0)}
	for _, c := range []judgeCase{
		{name: "stopped at 0 s: a window at 35-45 s never ran", events: stopAt(0), a: ready, verdict: Aborted, figure: "n/a",
			contains: []string{"not judged: window recovery:db-pause [t=35.000s, t=45.000s) never ran: the run stopped at t=0.000s"}},
		{name: "stopped inside the window", events: stopAt(40 * sec), a: ready, verdict: Aborted,
			contains: []string{"was cut short: the run stopped at t=40.000s"}},
		{name: "stopped after the window: judged", events: stopAt(50 * sec), a: ready, verdict: Pass},
		{name: "stopped exactly at the window's end: judged", events: stopAt(45 * sec), a: ready, verdict: Pass},
		{name: "earlier window still judged", events: stopAt(22 * sec), a: restarts, verdict: Pass},
		{name: "no load-end event: judged", events: correctEvents(), a: ready, verdict: Pass},
	} {
		t.Run(c.name, c.run)
	}
}
