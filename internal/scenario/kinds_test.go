package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// exampleBase is a scenario every kind's example fits into: the proxies,
// dependencies, service, streams and metrics the examples name. The
// faults and assertions sections are filled in per example.
const exampleBase = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: kind-examples
timeline:
  duration: 90s
  warmup: 5s
dependencies:
  - name: postgres
    postgres: {}
  - name: postgres-container
    postgres:
      mode: container
  - name: tax
    httpStub: {}
proxies:
  - name: postgres
    upstream: ${dependencies.postgres.addr}
  - name: tax-api
    upstream: ${dependencies.tax.addr}
services:
  - name: order-gateway
    reference: order-gateway
    replicas: 3
streams:
  - name: orders
    targets:
      - url: ${services.order-gateway.url}/orders
    rate: 10/s
  - name: tax
    targets:
      - url: ${services.order-gateway.url}/tax
    rate: 10/s
    checks:
      - name: retry-after-5
        status: [503, 429]
        header: Retry-After
        equals: "5"
  - name: card-auth
    targets:
      - url: ${services.order-gateway.url}/auth
    rate: 10/s
observers:
  metrics:
    - name: gateway
      url: ${services.order-gateway.url}/metrics
%s
%s
`

// kubeExample is a kubernetes scenario with faults, for the examples of
// kinds that act only there.
func kubeExample(faults string) string {
	return `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: kind-examples-kubernetes
environment:
  type: kubernetes
  kubernetes: {allowedContexts: [staging], namespace: shop}
timeline:
  duration: 90s
  warmup: 5s
services:
  - name: order-gateway
    selector: app=order-gateway
    url: http://127.0.0.1:18080
streams:
  - name: orders
    targets:
      - url: ${services.order-gateway.url}/orders
    rate: 10/s
` + faults + "\n"
}

// exampleFaults are the faults the assertion examples name.
const exampleFaults = `faults:
  - name: pg-pause
    type: timeout
    proxy: postgres
    at: 20s
    for: 15s
  - name: tax-brownout
    type: latency
    proxy: tax-api
    latency: 8s
    at: 50s
    for: 20s`

// TestFaultKindsDocumented pins that every fault kind has reference docs
// and an example, that the example is a valid fault of that kind, and
// that the scenario reference shows both.
func TestFaultKindsDocumented(t *testing.T) {
	var ref bytes.Buffer
	if err := WriteReference(&ref); err != nil {
		t.Fatal(err)
	}
	for _, sp := range FaultSpecs() {
		t.Run(string(sp.Type), func(t *testing.T) {
			if strings.TrimSpace(sp.Doc) == "" || strings.TrimSpace(sp.Example) == "" {
				t.Fatalf("fault kind %s lacks reference docs or an example in its FaultSpec", sp.Type)
			}
			if !strings.Contains(ref.String(), "##### fault `"+string(sp.Type)+"`\n\n"+mdEscape(sp.Doc)) {
				t.Fatalf("the scenario reference lacks fault kind %s", sp.Type)
			}
			doc := fmt.Sprintf(exampleBase, "faults:\n"+indent(sp.Example), "")
			if sp.KubernetesOnly {
				doc = kubeExample("faults:\n" + indent(sp.Example))
			}
			s, err := LoadReader("example.yaml", strings.NewReader(doc))
			if err != nil {
				t.Fatalf("the example of fault kind %s is not valid:\n%v\n%s", sp.Type, err, sp.Example)
			}
			if len(s.Faults) != 1 || s.Faults[0].Type != sp.Type {
				t.Fatalf("the example of fault kind %s is a fault of another kind: %+v", sp.Type, s.Faults)
			}
		})
	}
}

// TestAssertionKindsDocumented pins the same for every assertion kind.
func TestAssertionKindsDocumented(t *testing.T) {
	var ref bytes.Buffer
	if err := WriteReference(&ref); err != nil {
		t.Fatal(err)
	}
	for _, sp := range AssertionSpecs() {
		t.Run(string(sp.Type), func(t *testing.T) {
			if strings.TrimSpace(sp.Doc) == "" || strings.TrimSpace(sp.Example) == "" {
				t.Fatalf("assertion kind %s lacks reference docs or an example in its AssertionSpec", sp.Type)
			}
			if !strings.Contains(ref.String(), "##### assertion `"+string(sp.Type)+"`\n\n"+mdEscape(sp.Doc)) {
				t.Fatalf("the scenario reference lacks assertion kind %s", sp.Type)
			}
			doc := fmt.Sprintf(exampleBase, exampleFaults, "assertions:\n"+indent(sp.Example))
			s, err := LoadReader("example.yaml", strings.NewReader(doc))
			if err != nil {
				t.Fatalf("the example of assertion kind %s is not valid:\n%v\n%s", sp.Type, err, sp.Example)
			}
			if len(s.Assertions) != 1 || s.Assertions[0].Type != sp.Type {
				t.Fatalf("the example of assertion kind %s is an assertion of another kind: %+v", sp.Type, s.Assertions)
			}
		})
	}
}

// TestAssertionKindsDeclareLiveJudging: every assertion kind says in its
// spec how the console judges it while the run lives (the runner reads
// nothing else), a kind judged on closed seconds needs a stream, and the
// reference's summary row says it.
func TestAssertionKindsDeclareLiveJudging(t *testing.T) {
	want := map[AssertionType]LiveJudging{
		AssertRestarts: LiveOnEvents, AssertFlaps: LiveOnEvents, AssertReady: LiveOnEvents,
		AssertEndpointRemoval: LiveOnEvents, AssertUnroutable: LiveOnEvents, AssertDetection: LiveOnEvents,
		AssertStartupGate: LiveOnEvents,
		AssertLatency:     LiveOnSeconds, AssertErrorRate: LiveOnSeconds, AssertThroughput: LiveOnSeconds,
		AssertShed: LiveOnSeconds, AssertIsolation: LiveOnSeconds,
		AssertMetric:   LiveOnEvents,
		AssertRecovery: LiveAtEnd,
	}
	var ref bytes.Buffer
	if err := WriteReference(&ref); err != nil {
		t.Fatal(err)
	}
	for _, sp := range AssertionSpecs() {
		t.Run(string(sp.Type), func(t *testing.T) {
			switch sp.Live {
			case LiveOnEvents, LiveOnSeconds, LiveAtEnd:
			default:
				t.Fatalf("assertion kind %s declares no live judging (Live %q): set Live in its AssertionSpec to LiveOnEvents, LiveOnSeconds or LiveAtEnd", sp.Type, sp.Live)
			}
			if w, ok := want[sp.Type]; ok && sp.Live != w {
				t.Errorf("assertion kind %s: Live %q, want %q", sp.Type, sp.Live, w)
			}
			if f, ok := sp.field("stream"); sp.Live == LiveOnSeconds && (!ok || !f.Required) {
				t.Errorf("assertion kind %s is judged live on a stream's closed seconds but does not require stream", sp.Type)
			}
			row := fmt.Sprintf("| [`%s`](#assertion-%s) |", sp.Type, anchor(string(sp.Type)))
			found := false
			for _, line := range strings.Split(ref.String(), "\n") {
				if strings.HasPrefix(line, row) {
					found = strings.HasSuffix(line, " | "+sp.Live.liveText()+" |")
					break
				}
			}
			if !found {
				t.Errorf("the reference's summary row of %s does not say it is judged live %s", sp.Type, sp.Live.liveText())
			}
		})
	}
}

// TestRegistriesSortedAndUnique: the enumerations hints and the schema
// use come from the registries, sorted, each kind once.
func TestRegistriesSortedAndUnique(t *testing.T) {
	for name, list := range map[string][]string{"FaultTypes": FaultTypes, "AssertionTypes": AssertionTypes} {
		for i := 1; i < len(list); i++ {
			if list[i-1] >= list[i] {
				t.Errorf("%s not sorted or not unique: %v", name, list)
			}
		}
	}
	if len(FaultTypes) != len(faultSpecs) || len(AssertionTypes) != len(assertionSpecs) {
		t.Errorf("FaultTypes/AssertionTypes do not match the registries")
	}
}

// TestCheckFault covers the rules of each fault kind on a single fault,
// as internal/inject calls them: the same messages Validate gives.
func TestCheckFault(t *testing.T) {
	d := func(x time.Duration) *Duration { return &Duration{x} }
	b := func(n int64) *ByteSize { x := ByteSize(n); return &x }
	f64 := func(x float64) *float64 { return &x }
	i64 := func(x int64) *int64 { return &x }
	tests := []struct {
		name  string
		fault Fault
		want  string // "" = accepted
	}{
		{"latency ok", Fault{Type: FaultLatency, Proxy: "p", Latency: d(time.Millisecond)}, ""},
		{"latency missing", Fault{Type: FaultLatency, Proxy: "p"}, "a latency fault needs latency"},
		{"latency rounds to 0", Fault{Type: FaultLatency, Proxy: "p", Latency: d(300 * time.Microsecond)},
			"latency 300µs rounds to 0ms; Toxiproxy counts whole milliseconds"},
		{"jitter above latency", Fault{Type: FaultLatency, Proxy: "p", Latency: d(10 * time.Millisecond), Jitter: d(20 * time.Millisecond)},
			"jitter (20ms) must not exceed latency (10ms)"},
		{"foreign key", Fault{Type: FaultLatency, Proxy: "p", Latency: d(time.Millisecond), Timeout: d(0)},
			"timeout does not apply to a latency fault; it takes: jitter, latency"},
		{"timeout defaults to 0", Fault{Type: FaultTimeout, Proxy: "p"}, ""},
		{"no proxy", Fault{Type: FaultTimeout}, "a timeout fault needs proxy (the name of one of proxies)"},
		{"bad stream", Fault{Type: FaultTimeout, Proxy: "p", Stream: "sideways"},
			`unknown stream direction "sideways"; known: both, downstream, upstream`},
		{"toxicity 0", Fault{Type: FaultTimeout, Proxy: "p", Toxicity: f64(0)}, "toxicity 0 would never affect a connection"},
		{"toxicity above 1", Fault{Type: FaultTimeout, Proxy: "p", Toxicity: f64(1.5)}, "toxicity must be between 0 and 1, got 1.5"},
		{"bandwidth 0", Fault{Type: FaultBandwidth, Proxy: "p", RateKBps: i64(0)}, "rateKBps must be above 0"},
		{"bandwidth negative", Fault{Type: FaultBandwidth, Proxy: "p", RateKBps: i64(-1)}, "rateKBps must not be negative"},
		{"jitter rounds to 0", Fault{Type: FaultLatency, Proxy: "p", Latency: d(time.Millisecond), Jitter: d(100 * time.Microsecond)},
			"jitter 100µs rounds to 0ms"},
		{"timeout rounds to 0", Fault{Type: FaultTimeout, Proxy: "p", Timeout: d(400 * time.Microsecond)}, "timeout 400µs rounds to 0ms"},
		{"reset_peer rounds to 0", Fault{Type: FaultResetPeer, Proxy: "p", Timeout: d(400 * time.Microsecond)}, "timeout 400µs rounds to 0ms"},
		{"reset_peer defaults to 0", Fault{Type: FaultResetPeer, Proxy: "p"}, ""},
		{"slow_close rounds to 0", Fault{Type: FaultSlowClose, Proxy: "p", Delay: d(time.Microsecond)}, "delay 1µs rounds to 0ms"},
		{"slicer variation", Fault{Type: FaultSlicer, Proxy: "p", AverageSize: b(64), SizeVariation: b(64)},
			"sizeVariation (64) must be below averageSize (64)"},
		{"slicer size 0", Fault{Type: FaultSlicer, Proxy: "p", AverageSize: b(0)}, "averageSize must be above 0"},
		{"slicer sub-µs delay", Fault{Type: FaultSlicer, Proxy: "p", AverageSize: b(64), Delay: d(500)}, "delay 500ns is below 1µs"},
		{"slicer µs delay ok", Fault{Type: FaultSlicer, Proxy: "p", AverageSize: b(64), Delay: d(10 * time.Microsecond)}, ""},
		{"limit_data 0", Fault{Type: FaultLimitData, Proxy: "p", Bytes: b(0)}, "bytes must be above 0"},
		{"down with stream", Fault{Type: FaultDown, Proxy: "p", Stream: "both"}, "stream applies only to toxics, not to a down fault"},
		{"pause with proxy", Fault{Type: FaultProcessPause, Dependency: "d", Proxy: "p"},
			"proxy does not apply to a process-pause fault (it acts on dependency)"},
		{"pause without dependency", Fault{Type: FaultContainerPause}, "a container-pause fault needs dependency"},
		{"too long", Fault{Type: FaultSlowClose, Proxy: "p", Delay: d(25 * time.Hour)}, "delay 25h0m0s is too long"},
		{"unknown kind", Fault{Type: "latncy"}, `unknown fault type "latncy"; known: bandwidth, container-pause, down`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFault(tc.fault)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// Validate reports the same rule at the key it is about.
	s := &Scenario{Faults: []Fault{{Name: "f", Type: FaultLatency, Proxy: "p", Latency: d(300 * time.Microsecond), At: Duration{time.Second}, For: Duration{time.Second}}},
		Proxies: []Proxy{{Name: "p", Upstream: "127.0.0.1:1"}}, Timeline: Timeline{Duration: Duration{time.Minute}}}
	s.SetDefaults()
	var errs *Errors
	if err := s.Validate(); !errors.As(err, &errs) || !strings.Contains(err.Error(), "faults[0].latency: latency 300µs rounds to 0ms") {
		t.Fatalf("Validate = %v, want the rounding problem at faults[0].latency", err)
	}
}

// TestAssertionDurationsAboveZero: maxLatency, hold and within are
// refused at 0, each at its own key.
func TestAssertionDurationsAboveZero(t *testing.T) {
	doc := fmt.Sprintf(exampleBase, exampleFaults, `assertions:
  - type: latency
    stream: orders
    maxLatency: 0s
    window: fault:pg-pause
  - type: recovery
    stream: orders
    maxLatency: 120ms
    hold: 0s
    within: 0s
    window: recovery:pg-pause`)
	_, err := LoadReader("example.yaml", strings.NewReader(doc))
	for _, want := range []string{
		"assertions[0].maxLatency: maxLatency must be above 0",
		"assertions[1].hold: hold must be above 0",
		"assertions[1].within: within must be above 0",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadReader = %v, want it to contain %q", err, want)
		}
	}
}
