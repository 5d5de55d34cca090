// Package recordtest builds synthetic run records for tests and previews:
// a payment-core tax brownout (BULKHEAD-PAY-001) with two load streams,
// two replicas, lane metrics and a full set of assertions. Everything is
// computed from formulas (no randomness, no clock), so the same call
// always gives the same record.
package recordtest

import (
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
)

const (
	sec = time.Second
	ms  = time.Millisecond
)

// Timeline of the synthetic run: 60 s, 5 s warm-up, the tax-brownout
// fault on [20 s, 35 s), recovery window [35 s, 45 s).
const (
	RunLength = 60 * sec
	Warmup    = 5 * sec
	FaultOn   = 20 * sec
	FaultOff  = 35 * sec
	Recovery  = 10 * sec
)

// Options shape the synthetic run.
type Options struct {
	// Naive makes card-auth share the tax lane's pool: its p99 climbs past
	// 2 s during the fault and a replica is restarted by its liveness probe.
	Naive bool
	// Scale divides the request rates (1 = 1400 + 150 req/s); use 10 or
	// more for small, fast records.
	Scale int
}

func dur(d time.Duration) *scenario.Duration { return &scenario.Duration{Duration: d} }
func f64(v float64) *float64                 { return &v }
func boolp(b bool) *bool                     { return &b }

// Scenario returns the synthetic scenario (already defaulted).
func Scenario(o Options) *scenario.Scenario {
	build := "correct"
	if o.Naive {
		build = "naive"
	}
	rate := func(n int) *scenario.Rate {
		return &scenario.Rate{Freq: n / scale(o), Per: sec}
	}
	return &scenario.Scenario{
		APIVersion: scenario.APIVersion, Kind: scenario.KindScenario,
		Metadata: scenario.Metadata{Name: "payment-tax-brownout", Description: "8,000 ms tax API brownout against payment-core (" + build + ")",
			Sources: []string{"BULKHEAD-PAY-001 INV-BH-01", "BULKHEAD-PAY-001 INV-BH-02"}},
		Environment: scenario.Environment{Type: scenario.EnvLocal},
		Timeline:    scenario.Timeline{Duration: scenario.Duration{Duration: RunLength}, Warmup: scenario.Duration{Duration: Warmup}, Recovery: scenario.Duration{Duration: Recovery}},
		Proxies:     []scenario.Proxy{{Name: "tax-api", Upstream: "127.0.0.1:18080"}},
		Services: []scenario.Service{{Name: "payment-core", Reference: "payment-core", Build: build, Replicas: 2,
			Env: map[string]string{"DB_PASSWORD": "hunter2", "LOG_LEVEL": "info"}}},
		Streams: []scenario.Stream{
			{Name: "card-auth", Rate: rate(1400), Targets: []scenario.Target{{Method: "POST", URL: "http://127.0.0.1:8081/v1/authorize",
				Headers: map[string]string{"Authorization": "Bearer s3cr3t-token", "Content-Type": "application/json"}}}},
			{Name: "tax", Rate: rate(150), Targets: []scenario.Target{{Method: "POST", URL: "http://127.0.0.1:8081/v1/tax"}}},
		},
		Faults: []scenario.Fault{{Name: "tax-brownout", Type: scenario.FaultLatency, Proxy: "tax-api",
			At: scenario.Duration{Duration: FaultOn}, For: scenario.Duration{Duration: FaultOff - FaultOn}, Latency: dur(8000 * ms)}},
		Assertions: []scenario.Assertion{
			{Name: "auth-p99-during-brownout", Type: scenario.AssertLatency, Stream: "card-auth", Window: "fault:tax-brownout",
				MaxLatency: dur(120 * ms), Source: "BULKHEAD-PAY-001 INV-BH-02"},
			{Name: "auth-errors", Type: scenario.AssertErrorRate, Stream: "card-auth", Window: "run", MaxRate: f64(0.001)},
			{Name: "tax-shed-fast", Type: scenario.AssertShed, Stream: "tax", Window: "fault:tax-brownout",
				MaxLatency: dur(5 * ms), RetryAfter: boolp(true), Source: "BULKHEAD-PAY-001 INV-BH-03"},
			{Name: "tax-lane-recovers", Type: scenario.AssertRecovery, Window: "recovery:tax-brownout",
				Metric: "bulkhead_active_workers", Labels: map[string]string{"lane": "tax_calc"}, Op: "<", Value: f64(5),
				Within: dur(5 * sec), Source: "BULKHEAD-PAY-001 REC-01"},
			{Name: "no-restarts", Type: scenario.AssertRestarts, Service: "payment-core", Window: "fault:tax-brownout..recovery:tax-brownout"},
			{Name: "auth-throughput", Type: scenario.AssertThroughput, Stream: "card-auth", Window: "run"},
			{Name: "auth-isolation", Type: scenario.AssertIsolation, Stream: "card-auth", Window: "fault:tax-brownout",
				MaxP99Ratio: f64(2), MaxErrorRateDelta: f64(0.001)},
			{Name: "replicas-ready", Type: scenario.AssertReady, Service: "payment-core", Window: "recovery:tax-brownout"},
		},
		File: "scenarios/payment-tax-brownout.yaml",
	}
}

func scale(o Options) int {
	if o.Scale < 1 {
		return 1
	}
	return o.Scale
}

// Plan returns the synthetic run's plan.
func Plan() *plan.Plan {
	return &plan.Plan{
		Scenario: "payment-tax-brownout", Duration: RunLength, Warmup: Warmup,
		Actions: []plan.Action{
			{At: 0, Kind: plan.StreamStart, Target: "card-auth"},
			{At: 0, Kind: plan.StreamStart, Target: "tax"},
			{At: FaultOn, Kind: plan.FaultOn, Target: "tax-brownout", Detail: "latency 8000ms on tax-api"},
			{At: FaultOff, Kind: plan.FaultOff, Target: "tax-brownout"},
			{At: RunLength, Kind: plan.StreamStop, Target: "card-auth"},
			{At: RunLength, Kind: plan.StreamStop, Target: "tax"},
			{At: RunLength, Kind: plan.RunEnd},
		},
		Windows: []plan.Window{
			{Name: "run", Start: Warmup, End: RunLength},
			{Name: "baseline", Start: Warmup, End: FaultOn},
			{Name: "fault:tax-brownout", Start: FaultOn, End: FaultOff, Fault: "tax-brownout"},
			{Name: "recovery:tax-brownout", Start: FaultOff, End: FaultOff + Recovery, Fault: "tax-brownout"},
		},
	}
}

// Events returns the synthetic event log, sorted by At.
func Events(o Options) []event.Event {
	var evs []event.Event
	add := func(e event.Event) { evs = append(evs, e) }
	pods := []string{"payment-core-0", "payment-core-1"}
	for i, p := range pods {
		at := -8*sec + time.Duration(i)*150*ms
		add(event.Event{At: at, Kind: event.PodCreated, Source: "local-runtime", Service: "payment-core", Pod: p})
		add(event.Event{At: at + 20*ms, Kind: event.PodStarted, Source: "local-runtime", Service: "payment-core", Pod: p, Container: "payment-core"})
		add(event.Event{At: at + 1500*ms, Kind: event.PodReady, Source: "local-runtime", Service: "payment-core", Pod: p})
		add(event.Event{At: at + 1502*ms, Kind: event.EndpointReady, Source: "local-runtime", Service: "payment-core", Pod: p, Address: fmt.Sprintf("127.0.0.1:%d", 9100+i)})
	}
	add(event.Event{At: -10 * sec, Kind: event.Note, Source: "run", Detail: "Authorization: Bearer s3cr3t-token seen in a debug line"})
	add(event.Event{At: 0, Kind: event.PhaseStart, Source: "run", Detail: "load-start"})
	add(event.Event{At: Warmup, Kind: event.PhaseStart, Source: "run", Detail: "baseline"})
	add(event.Event{At: FaultOn + 3*ms, Kind: event.FaultOn, Source: "run", Fault: "tax-brownout", Detail: "latency 8000ms on tax-api (downstream)"})
	add(event.Event{At: FaultOff + 2*ms, Kind: event.FaultOff, Source: "run", Fault: "tax-brownout"})
	add(event.Event{At: RunLength, Kind: event.PhaseStart, Source: "run", Detail: "load-end"})
	if o.Naive {
		p := pods[1]
		for i := 0; i < 3; i++ {
			add(event.Event{At: 27*sec + time.Duration(i)*5*sec, Kind: event.ProbeResult, Source: "local-runtime", Service: "payment-core",
				Pod: p, Container: "payment-core", Probe: event.ProbeLiveness, Detail: "GET /healthz/live: context deadline exceeded (1s)", Value: 1})
		}
		add(event.Event{At: 37100 * ms, Kind: event.PodUnready, Source: "local-runtime", Service: "payment-core", Pod: p})
		add(event.Event{At: 37130 * ms, Kind: event.EndpointNotReady, Source: "local-runtime", Service: "payment-core", Pod: p})
		add(event.Event{At: 37200 * ms, Kind: event.ContainerRestart, Source: "local-runtime", Service: "payment-core", Pod: p,
			Container: "payment-core", RestartCount: 1, Reason: "liveness probe failed", Probe: event.ProbeLiveness,
			Logs: []string{"shared pool exhausted: 40/40 busy", "GET /healthz/live blocked on pool", "received SIGTERM"}})
		add(event.Event{At: 37250 * ms, Kind: event.PodStarted, Source: "local-runtime", Service: "payment-core", Pod: p, Container: "payment-core", RestartCount: 1})
		add(event.Event{At: 39 * sec, Kind: event.PodReady, Source: "local-runtime", Service: "payment-core", Pod: p})
		add(event.Event{At: 39004 * ms, Kind: event.EndpointReady, Source: "local-runtime", Service: "payment-core", Pod: p})
	}
	// Lane metrics scraped once a second from each replica.
	limits := map[string]float64{"card_auth": 75, "fraud_eval": 30, "tax_calc": 15}
	for s := 0; s < int(RunLength/sec); s++ {
		t := time.Duration(s)*sec + 250*ms
		inFault := t >= FaultOn && t < FaultOff+2*sec
		for i, p := range pods {
			for _, lane := range []string{"card_auth", "fraud_eval", "tax_calc"} {
				v := float64(1 + (s+i)%4)
				switch {
				case lane == "card_auth" && o.Naive && inFault:
					v = limits[lane]
				case lane == "card_auth":
					v = float64(18 + (s*7+i*3)%9)
				case lane == "tax_calc" && inFault:
					v = limits[lane]
				case lane == "tax_calc" && t >= FaultOff+2*sec && t < FaultOff+4*sec:
					v = 7
				}
				add(event.Event{At: t + time.Duration(i)*ms, Kind: event.Metric, Source: "scrape", Pod: p,
					Metric: "bulkhead_active_workers", Labels: map[string]string{"lane": lane, "instance": p}, Value: v})
			}
			rej := 0.0
			if s > int(FaultOn/sec) {
				rej = float64(min(s, int(FaultOff/sec))-int(FaultOn/sec)) * 70
			}
			add(event.Event{At: t + time.Duration(i)*ms, Kind: event.Metric, Source: "scrape", Pod: p,
				Metric: "bulkhead_rejections_total", Labels: map[string]string{"lane": "tax_calc", "instance": p}, Value: rej})
		}
	}
	return sortEvents(evs)
}

func sortEvents(evs []event.Event) []event.Event {
	var l event.Log
	for _, e := range evs {
		l.Emit(e)
	}
	return l.Events()
}

// Series returns the two streams' per-second buckets.
func Series(o Options) map[string]*measure.Series {
	sc := scale(o)
	auth := &measure.Series{Stream: "card-auth"}
	tax := &measure.Series{Stream: "tax"}
	for s := 0; s < int(RunLength/sec); s++ {
		start := time.Duration(s) * sec
		inFault := start >= FaultOn && start < FaultOff
		// card-auth: ~18 ms median, a tail to ~60 ms; naive: seconds in the fault.
		b := measure.NewBucket(start, sec)
		n := 1400 / sc
		b.Intended = int64(n)
		for k := 0; k < n; k++ {
			lat := 8*ms + time.Duration(k%100)*200*time.Microsecond
			if k%100 == 99 {
				lat = 45*ms + time.Duration(s%5)*3*ms
			}
			if inFault && o.Naive {
				lat = 900*ms + time.Duration(k%100)*22*ms
			}
			measure.Record(b.Latency, lat)
			measure.Record(b.Lag, time.Duration(50+k%200)*time.Microsecond)
			b.Requests++
			switch {
			case inFault && o.Naive && k%20 == 0:
				b.Errors[measure.ErrTimeout]++
			default:
				b.Codes[200]++
				b.OK++
				measure.Record(b.Success, lat)
			}
		}
		if s == 50 { // one late straggler
			b.Intended++
		}
		auth.Buckets = append(auth.Buckets, b)

		// tax: 150/s; shed fast with Retry-After during the fault.
		t := measure.NewBucket(start, sec)
		m := 150 / sc
		t.Intended = int64(m)
		for k := 0; k < m; k++ {
			t.Requests++
			switch {
			case inFault && !o.Naive:
				d := 800*time.Microsecond + time.Duration(k%10)*150*time.Microsecond
				measure.Record(t.Latency, d)
				measure.Record(t.Shed, d)
				t.Codes[503]++
				t.ShedRetryAfter++
			case inFault:
				t.Errors[measure.ErrTimeout]++
				measure.Record(t.Latency, 5*sec)
			default:
				d := 30*ms + time.Duration(k%50)*ms
				measure.Record(t.Latency, d)
				measure.Record(t.Success, d)
				t.Codes[200]++
				t.OK++
			}
			measure.Record(t.Lag, 80*time.Microsecond)
		}
		tax.Buckets = append(tax.Buckets, t)
	}
	return map[string]*measure.Series{"card-auth": auth, "tax": tax}
}

// Run returns a complete, judged synthetic run record with verified
// cleanup and a valid measurement.
func Run(o Options) *record.Run {
	r := &record.Run{
		SchemaVersion: record.SchemaVersion,
		RunID:         "drill-20260101T120000Z-a1b2c3",
		Scenario:      Scenario(o),
		ScenarioFile:  "scenarios/payment-tax-brownout.yaml",
		Plan:          Plan(),
		StartedAt:     time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC),
		EndedAt:       time.Date(2026, 1, 1, 12, 1, 2, 0, time.UTC),
		Events:        Events(o),
		Series:        Series(o),
		Validity:      record.Validity{Warnings: []string{"synthetic run: no real system was exercised"}},
		Cleanup:       record.Cleanup{Verified: true},
		Environment: record.Environment{Type: "local", DrillVersion: "dev", GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", CPUs: 2,
			Notes: map[string]string{"toxiproxy": "embedded v2.12.0"}},
	}
	r.Rejudge()
	return r
}
