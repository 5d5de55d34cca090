package observe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

func dur(s string) scenario.Duration {
	d, err := scenario.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestStartRunsEveryObserver(t *testing.T) {
	metrics, _, _ := metricServer(t)
	prom := httptest.NewServer(&fakeProm{t: t})
	defer prom.Close()
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ready.Close()
	vars := map[string]string{
		"services.gw.url": ready.URL,
		"metrics.url":     metrics.URL,
	}
	obs := scenario.Observers{
		Pods:           []scenario.PodObserver{{Name: "order-gateway", Selector: "app=order-gateway"}},
		EndpointSlices: []scenario.EndpointSliceObserver{{Name: "order-gateway", Service: "order-gateway"}},
		Probes:         []scenario.ProbeObserver{{Name: "gw-ready", URL: "${services.gw.url}/healthz/ready", Interval: dur("20ms")}},
		Metrics:        []scenario.MetricsObserver{{Name: "gw", URL: "${metrics.url}/metrics", Interval: dur("20ms"), Metrics: []string{"lane_active_workers"}}},
		PromQL:         []scenario.PromQLObserver{{Name: "workers", URL: prom.URL, Query: `lane_active_workers{lane="tax"}`, Interval: dur("20ms")}},
	}
	cs := fake.NewClientset(
		newPod("gw-a", "order-gateway", true, 0),
		newSlice("gw-x1", "order-gateway", epSpec{pod: "gw-a"}),
	)
	sink := newCollect()
	deps := Deps{Kube: cs, Namespace: ns, Expand: func(s string) (string, error) { return scenario.Expand(s, vars) }}
	stop, err := Start(context.Background(), obs, deps, event.NewClock(), sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Start returns after the informers synced: the initial state is there.
	ev := sink.snapshot()
	if count(ev, has(event.PodReady, "gw-a")) != 1 {
		t.Errorf("initial pod state missing after Start:\n%s", dump(ev))
	}
	ev = sink.waitFor(t, "every observer", func(ev []event.Event) bool {
		return count(ev, func(e event.Event) bool { return e.Kind == event.ProbeResult && e.OK && e.Probe == "gw-ready" }) > 0 &&
			count(ev, func(e event.Event) bool { return e.Source == SourceScrape && e.Metric == "lane_active_workers" }) > 0 &&
			count(ev, func(e event.Event) bool { return e.Source == SourcePromQL && e.Metric == "workers" }) > 0 &&
			count(ev, func(e event.Event) bool { return e.Kind == event.EndpointReady && e.Service == "order-gateway" }) > 0
	})
	stop()
	stop() // idempotent
	n := len(sink.snapshot())
	time.Sleep(100 * time.Millisecond)
	if m := len(sink.snapshot()); m != n {
		t.Errorf("%d events after stop", m-n)
	}
	for _, e := range ev {
		if e.Kind == event.ProbeResult && e.Address != ready.URL+"/healthz/ready" {
			t.Errorf("probe address %q not expanded", e.Address)
		}
	}
}

func TestStartRefusesBadInput(t *testing.T) {
	vars := map[string]string{"services.gw.url": "http://127.0.0.1:1"}
	expand := func(s string) (string, error) { return scenario.Expand(s, vars) }
	tests := []struct {
		name    string
		obs     scenario.Observers
		deps    Deps
		wantErr string
	}{
		{"unknown var", scenario.Observers{Probes: []scenario.ProbeObserver{{Name: "p", URL: "${services.nope.url}/x"}}},
			Deps{Expand: expand}, "observers.probes[0] (p): expand"},
		{"not http", scenario.Observers{Metrics: []scenario.MetricsObserver{{Name: "m", URL: "ftp://x/metrics"}}},
			Deps{Expand: expand}, `observers.metrics[0] (m): url "ftp://x/metrics": scheme must be http or https`},
		{"relative", scenario.Observers{PromQL: []scenario.PromQLObserver{{Name: "q", URL: "/api", Query: "up"}}},
			Deps{Expand: expand}, "observers.promql[0] (q)"},
		{"pods without cluster", scenario.Observers{Pods: []scenario.PodObserver{{Name: "gw", Selector: "app=gw"}}},
			Deps{Expand: expand}, "need a kubernetes environment"},
		{"bad selector", scenario.Observers{Pods: []scenario.PodObserver{{Name: "gw", Selector: "app in (("}}},
			Deps{Kube: fake.NewClientset(), Namespace: ns}, "parse pod selector"},
		{"no namespace", scenario.Observers{EndpointSlices: []scenario.EndpointSliceObserver{{Name: "gw", Service: "gw"}}},
			Deps{Kube: fake.NewClientset()}, "no namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop, err := Start(context.Background(), tt.obs, tt.deps, event.NewClock(), newCollect(), nil)
			if err == nil {
				stop()
				t.Fatal("Start accepted bad input")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}
