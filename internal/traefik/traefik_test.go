package traefik

import (
	"fmt"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/event"
)

func TestParseEntryAndClassify(t *testing.T) {
	tests := []struct {
		name, line string
		ok         bool
		want       Verdict
	}{
		{"forwarded", `{"StartUTC":"2026-12-06T22:00:00.123456789Z","Duration":1500000,"RouterName":"orders@docker","ServiceName":"orders@docker","ServiceURL":"http://172.18.0.3:8080","OriginStatus":201,"DownstreamStatus":201,"RequestPath":"/orders","RequestMethod":"POST"}`, true, Forwarded},
		{"no router", `{"StartUTC":"2026-12-06T22:00:01Z","OriginStatus":0,"DownstreamStatus":404,"RequestPath":"/orders","RequestMethod":"POST"}`, true, NoRouter},
		{"no server: empty load balancer", `{"StartUTC":"2026-12-06T22:00:02Z","RouterName":"orders@docker","ServiceName":"orders@docker","ServiceURL":"","OriginStatus":0,"DownstreamStatus":503,"RequestPath":"/orders"}`, true, NoServer},
		{"no server: a server without a URL (v3.6.12, allowEmptyServices)", `{"StartUTC":"2026-12-06T22:40:12.931295084Z","RouterName":"app@docker","ServiceName":"app@docker","ServiceURL":"","ServiceAddr":"","OriginStatus":500,"DownstreamStatus":500}`, true, NoServer},
		{"backend 503 is the service's", `{"StartUTC":"2026-12-06T22:00:02Z","RouterName":"orders@docker","ServiceURL":"http://172.18.0.3:8080","OriginStatus":503,"DownstreamStatus":503}`, true, Forwarded},
		{"bad gateway says nothing of routing", `{"StartUTC":"2026-12-06T22:00:02Z","RouterName":"orders@docker","ServiceURL":"http://172.18.0.3:8080","OriginStatus":0,"DownstreamStatus":502}`, true, Unknown},
		{"traefik's own log", `{"level":"warn","time":"2026-12-06T22:00:02Z","message":"x"}`, false, Unknown},
		{"not json", `time="x" level=info`, false, Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := ParseEntry([]byte(tt.line))
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v", ok, tt.ok)
			}
			if ok && Classify(e) != tt.want {
				t.Errorf("verdict %d, want %d (%+v)", Classify(e), tt.want, e)
			}
		})
	}
}

type sink struct{ evs []event.Event }

func (s *sink) Emit(e event.Event) { s.evs = append(s.evs, e) }

// TestEntryTransitions feeds access log entries in the order Traefik
// writes them (at each request's end) and checks the routing events: one
// per change, at the request's start on the run's clock, a late entry of
// a request that started before the last change ignored, and 404s
// attributed through the labels' rules.
func TestEntryTransitions(t *testing.T) {
	routes, err := composefile.ParseRoutes(&composefile.Project{Services: []composefile.Service{{Name: "order-gateway", Labels: map[string]string{
		"traefik.http.routers.orders.rule":                      "PathPrefix(`/orders`)",
		"traefik.http.services.orders.loadbalancer.server.port": "8080",
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	s := &sink{}
	o := &Observer{cfg: Config{Routes: routes, Clock: event.NewClockAt(start), Sink: s, ProbePath: "/.drill-clock/",
		Servers: map[string]Server{"order-gateway": {Service: "order-gateway", Pod: "drill-x-order-gateway", Address: "172.18.0.3:8080"}}},
		offset: &Offset{Shift: 2 * time.Millisecond}, state: map[string]bool{}, lastAt: map[string]time.Duration{}, latest: map[latestKey]time.Duration{}, probes: map[string]chan time.Time{},
		perSecond: map[secondKey]int64{}}
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	fwd := Entry{RouterName: "orders@docker", ServiceURL: "http://172.18.0.3:8080", OriginStatus: 201, DownstreamStatus: 201, RequestPath: "/orders", RequestMethod: "POST"}
	nr := Entry{DownstreamStatus: 404, RequestPath: "/orders", RequestMethod: "POST"}
	other := Entry{DownstreamStatus: 404, RequestPath: "/elsewhere"}
	for _, e := range []struct {
		e  Entry
		ms int
	}{
		{fwd, 100}, {fwd, 200}, {nr, 1000}, {nr, 1010},
		{fwd, 900},    // started before the removal, written after: no change
		{other, 1500}, // a path no router of the labels matches: no service
		{fwd, 3000}, {nr, 4000}, {fwd, 5000},
	} {
		x := e.e
		x.StartUTC = at(e.ms)
		o.entry(x)
	}
	want := []struct {
		kind event.Kind
		ms   int
	}{{event.EndpointReady, 100}, {event.EndpointRemoved, 1000}, {event.EndpointReady, 3000}, {event.EndpointRemoved, 4000}, {event.EndpointReady, 5000}}
	if len(s.evs) != len(want) {
		t.Fatalf("events %+v, want %d", s.evs, len(want))
	}
	for i, w := range want {
		e := s.evs[i]
		if e.Kind != w.kind || e.At != time.Duration(w.ms)*time.Millisecond+2*time.Millisecond || e.Service != "order-gateway" || e.Source != SourceAccessLog || e.Pod != "drill-x-order-gateway" {
			t.Errorf("event %d: %s at %s (%s %s %s), want %s at %dms+2ms", i, e.Kind, e.At, e.Service, e.Source, e.Pod, w.kind, w.ms)
		}
	}
	// Each change but the first is bounded below by the latest request of
	// the other state logged before it: 200 ms (900 was logged only after
	// the removal), 1010, 3000, 4000, all +2 ms of offset.
	for i, ms := range map[int]int{1: 200, 2: 1010, 3: 3000, 4: 4000} {
		want := fmt.Sprint(int64(time.Duration(ms)*time.Millisecond + 2*time.Millisecond))
		if got := s.evs[i].Labels[LabelSince]; got != want {
			t.Errorf("event %d: since %q, want %s", i, got, want)
		}
	}
	if _, ok := s.evs[0].Labels[LabelSince]; ok {
		t.Errorf("first event has a since label: %v", s.evs[0].Labels)
	}
	if s.evs[1].Reason != "no router" {
		t.Errorf("removal reason %q, want no router", s.evs[1].Reason)
	}
	if c := o.counts; c.Entries != 9 || c.Forwarded != 5 || c.NoRouter != 4 {
		t.Errorf("counts %+v", c)
	}
	// Per second of the run's clock: the 404s at 1.000 and 1.010 s, then
	// the one at 4.000 s (the path no router matches names no service).
	want404 := map[secondKey]int64{{"order-gateway", MetricNoRouter, 1}: 2, {"order-gateway", MetricNoRouter, 4}: 1}
	if len(o.perSecond) != len(want404) {
		t.Errorf("per second %v, want %v", o.perSecond, want404)
	}
	for k, n := range want404 {
		if o.perSecond[k] != n {
			t.Errorf("per second %v: %d, want %d", k, o.perSecond[k], n)
		}
	}
}
