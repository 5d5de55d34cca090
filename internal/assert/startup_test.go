package assert

import (
	"testing"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// gateEvents is one compose container's bring-up: started at -10s, its
// dependency first answers through proxy postgres at -9.9s, the
// healthcheck (asking /startupz) fails once and passes at -6s, then passes
// every 2 s of the run; extra events are appended.
func gateEvents(extra ...event.Event) []event.Event {
	pod, svc := "drill-run-order-gateway", "order-gateway"
	evs := []event.Event{
		{At: -10 * sec, Kind: event.PodStarted, Service: svc, Pod: pod, Source: "docker"},
		{At: -9*sec - 900*ms1, Kind: event.DependencyAnswered, Labels: map[string]string{"proxy": "postgres"}, Value: 12},
		{At: -8 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: svc, Pod: pod, OK: false,
			Detail: `probe http://localhost:8080/startupz: HTTP 503: {"status":"starting"}`},
		{At: -6 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: svc, Pod: pod, OK: true},
		{At: -6 * sec, Kind: event.PodReady, Service: svc, Pod: pod},
	}
	for at := -4 * sec; at < 60*sec; at += 2 * sec {
		evs = append(evs, event.Event{At: at, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: svc, Pod: pod, OK: true})
	}
	return append(evs, extra...)
}

func TestStartupGate(t *testing.T) {
	pod := "drill-run-order-gateway"
	gate := scenario.Assertion{Type: scenario.AssertStartupGate, Service: "order-gateway", Window: "run"}
	withProxy := gate
	withProxy.Proxy = "postgres"
	// The ADR's naive setup: the healthcheck asks /readyz, which fails under
	// overload after the start.
	failsLater := gateEvents(
		event.Event{At: 24 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: "order-gateway", Pod: pod, OK: false,
			Detail: "probe http://localhost:8080/readyz: context deadline exceeded"},
		event.Event{At: 26 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: "order-gateway", Pod: pod, OK: false,
			Detail: "probe http://localhost:8080/readyz: context deadline exceeded"})
	// Option 2 of the ADR: a liveness-only healthcheck passes before the
	// database ever answered.
	early := []event.Event{
		{At: -10 * sec, Kind: event.PodStarted, Service: "order-gateway", Pod: pod},
		{At: -8 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: "order-gateway", Pod: pod, OK: true},
		{At: -3 * sec, Kind: event.DependencyAnswered, Labels: map[string]string{"proxy": "postgres"}, Value: 12},
	}
	noAnswer := []event.Event{early[0], early[1]}
	counterless := append([]event.Event{{At: -10 * sec, Kind: event.Note, Labels: map[string]string{"proxy": "postgres"},
		Detail: "proxy postgres: no live byte counters"}}, noAnswer...)
	// A restarted process passes its gate again during the run.
	restarted := gateEvents(
		event.Event{At: 30 * sec, Kind: event.PodStarted, Service: "order-gateway", Pod: pod, RestartCount: 1},
		event.Event{At: 31 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: "order-gateway", Pod: pod, OK: false,
			Detail: `HTTP 503: {"status":"starting"}`})
	// The new process fails its gate at 31 s, before its first pass at 32 s
	// (gateEvents' every-2-s checks): starting, not broken.
	for _, c := range []judgeCase{
		{name: "passed once before t=0, never failed after", events: gateEvents(), a: gate, verdict: Pass, figure: "0 violations",
			contains: []string{"every process of order-gateway (1 process) passed its startup gate once and never failed it after; the first at t=-6.000s"},
			evidence: []string{"passed its gate at t=-6.000s, then 32 more passing checks"}, extra: []string{"processes=1 process"}},
		{name: "after the dependency's first answer", events: gateEvents(), a: withProxy, verdict: Pass,
			contains: []string{"3.90s after its dependency first answered through proxy postgres"}, extra: []string{"dependency answered=t=-9.900s"}},
		{name: "a gate check failing after the first pass", events: failsLater, a: gate, verdict: Fail, figure: "1 violation",
			contains: []string{"failed 2 gate checks after its first pass at t=-6.000s (first at t=24.000s; last: probe http://localhost:8080/readyz: context deadline exceeded)"}},
		{name: "gate open before the dependency answered", events: early, a: withProxy, verdict: Fail,
			contains: []string{"passed its gate at t=-8.000s, 5.00s before its dependency first answered through proxy postgres (t=-3.000s)"}},
		{name: "gate open though the dependency never answered", events: noAnswer, a: withProxy, verdict: Fail,
			contains: []string{"passed its gate at t=-8.000s though its dependency never answered through proxy postgres"}},
		{name: "without proxy the answer is not asked for", events: noAnswer, a: gate, verdict: Pass},
		{name: "no live counters: cannot judge", events: counterless, a: withProxy, verdict: Error,
			contains: []string{"proxy postgres has no live byte counters"}},
		{name: "never passed", events: gateEvents()[:3], a: gate, verdict: Fail,
			contains: []string{"never passed its gate (1 check)"}},
		{name: "passed only after t=0", verdict: Fail, a: gate, events: []event.Event{
			{At: -1 * sec, Kind: event.PodStarted, Service: "order-gateway", Pod: pod},
			{At: 1 * sec, Kind: event.ProbeResult, Probe: event.ProbeHealthcheck, Service: "order-gateway", Pod: pod, OK: true}},
			contains: []string{"up before load but passed its gate only at t=1.000s, after t=0"}},
		{name: "a restart is a new process with a gate of its own", events: restarted, a: gate, verdict: Pass,
			extra: []string{"processes=2 processes"}},
		{name: "startup probe results of a local replica count", a: gate, verdict: Pass, events: []event.Event{
			{At: -5 * sec, Kind: event.PodStarted, Service: "order-gateway", Pod: "og-0"},
			{At: -4 * sec, Kind: event.ProbeResult, Probe: event.ProbeStartup, Service: "order-gateway", Pod: "og-0", OK: false},
			{At: -3 * sec, Kind: event.ProbeResult, Probe: event.ProbeStartup, Service: "order-gateway", Pod: "og-0", OK: true},
			{At: 10 * sec, Kind: event.ProbeResult, Probe: event.ProbeReadiness, Service: "order-gateway", Pod: "og-0", OK: false}}},
		{name: "no gate checks", a: gate, verdict: Error, events: []event.Event{
			{At: -5 * sec, Kind: event.PodStarted, Service: "order-gateway", Pod: "og-0"},
			{At: 10 * sec, Kind: event.ProbeResult, Probe: event.ProbeReadiness, Service: "order-gateway", Pod: "og-0", OK: true}},
			contains: []string{"no startup gate checks of order-gateway"}},
	} {
		t.Run(c.name, c.run)
	}
}
