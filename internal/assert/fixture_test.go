package assert

import (
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// Test fixtures: a 60 s run with 5 s warm-up, a baseline [5s, 20s), the
// fault db-pause on [20s, 35s) and its recovery window [35s, 45s).

const (
	sec = time.Second
	ms1 = time.Millisecond
)

func testPlan() *plan.Plan {
	return &plan.Plan{
		Scenario: "orders-db-brownout",
		Duration: 60 * sec,
		Warmup:   5 * sec,
		Actions: []plan.Action{
			{At: 0, Kind: plan.StreamStart, Target: "orders"},
			{At: 20 * sec, Kind: plan.FaultOn, Target: "db-pause"},
			{At: 35 * sec, Kind: plan.FaultOff, Target: "db-pause"},
			{At: 60 * sec, Kind: plan.RunEnd},
		},
		Windows: []plan.Window{
			{Name: "run", Start: 5 * sec, End: 60 * sec},
			{Name: "baseline", Start: 5 * sec, End: 20 * sec},
			{Name: "fault:db-pause", Start: 20 * sec, End: 35 * sec, Fault: "db-pause"},
			{Name: "recovery:db-pause", Start: 35 * sec, End: 45 * sec, Fault: "db-pause"},
		},
	}
}

func dur(d time.Duration) *scenario.Duration { return &scenario.Duration{Duration: d} }
func intp(n int) *int                        { return &n }
func f64(v float64) *float64                 { return &v }
func boolp(b bool) *bool                     { return &b }
func pct(p float64) *scenario.Percentile     { x := scenario.Percentile(p); return &x }

// bringUp returns the events of three order-gateway replicas starting
// and turning ready before load starts.
func bringUp() []event.Event {
	var evs []event.Event
	for i, p := range []string{"og-0", "og-1", "og-2"} {
		at := -10*sec + time.Duration(i)*100*ms1
		evs = append(evs,
			event.Event{At: at, Kind: event.PodCreated, Service: "order-gateway", Pod: p},
			event.Event{At: at, Kind: event.PodStarted, Service: "order-gateway", Pod: p, Container: "app"},
			event.Event{At: at + 2*sec, Kind: event.PodReady, Service: "order-gateway", Pod: p},
			event.Event{At: at + 2*sec + 5*ms1, Kind: event.EndpointReady, Service: "order-gateway", Pod: p, Address: "127.0.0.1"},
		)
	}
	return evs
}

func faultEvents() []event.Event {
	return []event.Event{
		{At: 20*sec + 2*ms1, Kind: event.FaultOn, Fault: "db-pause", Detail: "timeout 0"},
		{At: 35*sec + 1*ms1, Kind: event.FaultOff, Fault: "db-pause"},
	}
}

// correctEvents: the correct build under a 15 s database pause. Every
// replica goes unready (readiness on the DB), leaves the slice, and comes
// back after the pause; nothing restarts.
func correctEvents() []event.Event {
	evs := append(bringUp(), faultEvents()...)
	// unready at 21.5, 21.6, 21.7; endpoints out 400 ms, 120 ms, 30 ms later
	lat := []time.Duration{400 * ms1, 120 * ms1, 30 * ms1}
	for i, p := range []string{"og-0", "og-1", "og-2"} {
		u := 21500*ms1 + time.Duration(i)*100*ms1
		back := 36*sec + time.Duration(i)*200*ms1
		evs = append(evs,
			event.Event{At: u - 10*ms1, Kind: event.ProbeResult, Service: "order-gateway", Pod: p, Probe: event.ProbeReadiness, Detail: "GET /healthz/ready: 503"},
			event.Event{At: u, Kind: event.PodUnready, Service: "order-gateway", Pod: p},
			event.Event{At: u + lat[i], Kind: event.EndpointNotReady, Service: "order-gateway", Pod: p, Detail: "serving=false"},
			event.Event{At: back, Kind: event.PodReady, Service: "order-gateway", Pod: p},
			event.Event{At: back + 3*ms1, Kind: event.EndpointReady, Service: "order-gateway", Pod: p},
		)
	}
	return evs
}

// naiveEvents: the naive build: the deep /health fails liveness, og-1 is
// restarted at 27.3 s, and og-2 is unready but never leaves the slice.
func naiveEvents() []event.Event {
	evs := append(bringUp(), faultEvents()...)
	for i := 0; i < 3; i++ {
		evs = append(evs, event.Event{At: 25*sec + time.Duration(i)*sec, Kind: event.ProbeResult, Service: "order-gateway",
			Pod: "og-1", Probe: event.ProbeLiveness, Detail: "GET /health: context deadline exceeded (1s)"})
	}
	evs = append(evs,
		event.Event{At: 21 * sec, Kind: event.PodUnready, Service: "order-gateway", Pod: "og-1"},
		event.Event{At: 21*sec + 200*ms1, Kind: event.EndpointRemoved, Service: "order-gateway", Pod: "og-1"},
		event.Event{At: 27300 * ms1, Kind: event.ContainerRestart, Service: "order-gateway", Pod: "og-1", Container: "app",
			RestartCount: 1, Reason: "liveness probe failed", Probe: event.ProbeLiveness,
			Logs: []string{"ERROR db: context deadline exceeded", "health: unhealthy"}},
		event.Event{At: 27300 * ms1, Kind: event.PodStarted, Service: "order-gateway", Pod: "og-1", Container: "app", RestartCount: 1},
		event.Event{At: 22 * sec, Kind: event.PodUnready, Service: "order-gateway", Pod: "og-2"},
		event.Event{At: 23 * sec, Kind: event.PodReady, Service: "order-gateway", Pod: "og-2"},
	)
	return evs
}

// bucketSpec describes one second of a stream.
type bucketSpec struct {
	n       int           // completed requests
	lat     time.Duration // latency of most requests
	slow    int           // requests at slowLat
	slowLat time.Duration
	codes   map[int]int64 // status counts besides the n-... 200s
	errs    map[string]int64
	shed    int
	shedLat time.Duration
	shedRA  int64
	missing int // intended but never completed
}

// mkSeries builds a stream's 1 s buckets for seconds [0, len(spec)).
func mkSeries(name string, spec []bucketSpec) *measure.Series {
	s := &measure.Series{Stream: name}
	for i, sp := range spec {
		b := measure.NewBucket(time.Duration(i)*sec, sec)
		b.Intended = int64(sp.n + sp.missing)
		b.Requests = int64(sp.n)
		other := int64(0)
		for c, k := range sp.codes {
			b.Codes[c] = k
			other += k
		}
		for e, k := range sp.errs {
			b.Errors[e] = k
			other += k
		}
		b.Codes[200] += int64(sp.n) - other
		b.OK = b.Codes[200]
		for j := 0; j < sp.n-sp.slow; j++ {
			measure.Record(b.Latency, sp.lat)
		}
		for j := 0; j < sp.slow; j++ {
			measure.Record(b.Latency, sp.slowLat)
		}
		for j := 0; j < sp.shed; j++ {
			measure.Record(b.Shed, sp.shedLat)
		}
		b.ShedRetryAfter = sp.shedRA
		s.Buckets = append(s.Buckets, b)
	}
	return s
}

// steady returns n seconds of the same spec.
func steady(n int, sp bucketSpec) []bucketSpec {
	out := make([]bucketSpec, n)
	for i := range out {
		out[i] = sp
	}
	return out
}

// ordersSeries: 100 req/s, 10 ms, 1% at 80 ms; during the fault [20,35)
// 5% get 503 and p99 rises to 900 ms; recovery is slow until 37 s.
func ordersSeries() *measure.Series {
	var spec []bucketSpec
	for i := 0; i < 60; i++ {
		sp := bucketSpec{n: 100, lat: 10 * ms1, slow: 1, slowLat: 80 * ms1}
		if i >= 20 && i < 35 {
			sp = bucketSpec{n: 100, lat: 12 * ms1, slow: 5, slowLat: 900 * ms1, codes: map[int]int64{503: 5}}
		}
		if i >= 35 && i < 37 {
			sp = bucketSpec{n: 100, lat: 10 * ms1, slow: 3, slowLat: 400 * ms1}
		}
		spec = append(spec, sp)
	}
	return mkSeries("orders", spec)
}
