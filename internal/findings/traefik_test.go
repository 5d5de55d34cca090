package findings_test

import (
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/findings"
)

// TestTraefikAnswersByItsLog: behind the real Traefik of a compose run,
// the requests Traefik answered itself are the counts of its access log
// (per second), not the seconds the route was gone: 404s it did not
// count are the service's (other errors), and so are 503s beyond its
// no-server count (shed by the service).
func TestTraefikAnswersByItsLog(t *testing.T) {
	r := newRun()
	// Only Traefik's access log routes: one container, out 26.5-30 s.
	r.events = nil
	for _, e := range newRun().events {
		if e.Kind != event.PodReady && e.Kind != event.EndpointReady {
			r.events = append(r.events, e)
		}
	}
	const pod = "drill-x-order-gateway"
	r.events = append(r.events,
		event.Event{At: sec(-0.01), Kind: event.EndpointReady, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(26.5), Kind: event.EndpointRemoved, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod, Reason: "no router"},
		event.Event{At: sec(30), Kind: event.EndpointReady, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod})
	// The client: 404s in seconds 26-29 (100 each, 50 in second 26), of
	// which the log counts 340 as Traefik's; 20 more 404s of the service
	// in second 22; 503s shed by the service in second 23 (30), 500s
	// Traefik answered with no server in second 24 (10, all in its log).
	r.fail(26, 27, 50, 404, "")
	r.fail(27, 30, 100, 404, "")
	r.fail(22, 23, 20, 404, "")
	r.fail(23, 24, 30, 503, "")
	r.fail(24, 25, 10, 500, "")
	for s, n := range map[int]float64{26: 50, 27: 100, 28: 100, 29: 90} {
		r.events = append(r.events, event.Event{At: sec(float64(s)), Kind: event.Metric, Source: "traefik-accesslog",
			Service: "order-gateway", Metric: event.MetricTraefikNoRouter, Value: n})
	}
	r.events = append(r.events, event.Event{At: sec(24), Kind: event.Metric, Source: "traefik-accesslog",
		Service: "order-gateway", Metric: event.MetricTraefikNoServer, Value: 10})
	var fd *findings.Finding
	all := r.compute()
	for i, f := range all {
		if f.Kind == findings.KindShedding && f.Fault == "pg-pause" && f.Start == sec(20) {
			fd = &all[i]
		}
	}
	if fd == nil {
		t.Fatalf("no failure finding for the fault in %+v", all)
	}
	for _, w := range []string{
		"340 answered 404 by Traefik (no router: its Docker provider dropped the container)",
		"10 answered 500/503 by Traefik itself",
		"30 shed with 503/429 by the service",
		"30 other errors",
		"Traefik's own answers as its access log counted them",
	} {
		if !strings.Contains(fd.Text, w) {
			t.Errorf("finding does not say %q:\n%s", w, fd.Text)
		}
	}
	got := map[string]float64{}
	for _, f := range fd.Figures {
		got[f.Name] = f.Value
	}
	for name, v := range map[string]float64{"no-router-404": 340, "no-endpoint-503": 10, "shed-by-service": 30, "other-errors": 30} {
		if got[name] != v {
			t.Errorf("figure %s = %v, want %v (%s)", name, got[name], v, fd.Text)
		}
	}
}
