package findings_test

import (
	"fmt"
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
	// Only Traefik's access log routes: one container, out 26.5-30 s.
	const pod = "drill-x-order-gateway"
	r := traefikRun(
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
	checkFinding(t, fd, []string{
		"340 answered 404 by Traefik (no router: its Docker provider dropped the container)",
		"10 answered 500/503 by Traefik itself",
		"30 shed with 503/429 by the service",
		"30 other errors",
		"Traefik's own answers as its access log counted them",
	}, map[string]float64{"no-router-404": 340, "no-endpoint-503": 10, "shed-by-service": 30, "other-errors": 30})
}

// traefikRun is newRun with one container routed only by Traefik's access
// log, healthy from -1 s, plus the events of extra.
func traefikRun(extra ...event.Event) *run {
	r := newRun()
	r.events = nil
	for _, e := range newRun().events {
		if e.Kind != event.PodReady && e.Kind != event.EndpointReady {
			r.events = append(r.events, e)
		}
	}
	const pod = "drill-x-order-gateway"
	r.events = append(r.events,
		event.Event{At: sec(-1), Kind: event.PodReady, Source: "compose", Service: "order-gateway", Pod: pod, Detail: "health status healthy"},
		event.Event{At: sec(-0.01), Kind: event.EndpointReady, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod})
	r.events = append(r.events, extra...)
	return r
}

func since(s float64) map[string]string {
	return map[string]string{event.LabelSince: fmt.Sprint(int64(sec(s)))}
}

// TestTraefikUnroutableBounds: an unroutable interval read from Traefik's
// access log says how tightly the log brackets its start and end and how
// long after Docker's health status Traefik's Docker provider reacted.
func TestTraefikUnroutableBounds(t *testing.T) {
	const pod = "drill-x-order-gateway"
	r := traefikRun(
		event.Event{At: sec(24), Kind: event.PodUnready, Source: "compose", Service: "order-gateway", Pod: pod, Reason: "unhealthy"},
		event.Event{At: sec(26.5), Kind: event.EndpointRemoved, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod, Reason: "no router", Labels: since(26.497)},
		event.Event{At: sec(29.6), Kind: event.PodReady, Source: "compose", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(30), Kind: event.EndpointReady, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod, Labels: since(29.998)})
	var fd *findings.Finding
	all := r.compute()
	for i, f := range all {
		if f.Kind == findings.KindUnroutable {
			if fd != nil {
				t.Fatalf("two unroutable findings: %+v", all)
			}
			fd = &all[i]
		}
	}
	if fd == nil {
		t.Fatalf("no unroutable finding in %+v", all)
	}
	checkFinding(t, fd, []string{
		"between 26.497 s (the last request it forwarded) and 26.500 s (the first it answered itself)",
		"its end between 29.998 s and 30.000 s",
		"it began 2.5 s after Docker reported drill-x-order-gateway unhealthy (24.0 s: the Docker provider's reaction)",
		"ended 0.4 s after Docker reported it healthy again (29.6 s)",
	}, map[string]float64{"start-bound": 0.003, "end-bound": 0.002, "provider-reaction": 2.5, "provider-return": 0.4})
}

// TestTraefikKeptRouting: Docker reports the container unhealthy for 10 s
// and Traefik's access log never shows it answering for the service
// itself: a warning naming the span. A 1 s unhealthy blip, and a span that
// Traefik did cut, are not reported; nor is an interval whose container
// was healthy again before it (no cause in Docker's health).
func TestTraefikKeptRouting(t *testing.T) {
	const pod = "drill-x-order-gateway"
	r := traefikRun(
		event.Event{At: sec(10), Kind: event.PodUnready, Source: "compose", Service: "order-gateway", Pod: pod, Reason: "unhealthy"},
		event.Event{At: sec(11), Kind: event.PodReady, Source: "compose", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(24), Kind: event.PodUnready, Source: "compose", Service: "order-gateway", Pod: pod, Reason: "unhealthy"},
		event.Event{At: sec(26.5), Kind: event.EndpointRemoved, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod, Reason: "no router"},
		event.Event{At: sec(29.6), Kind: event.PodReady, Source: "compose", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(30), Kind: event.EndpointReady, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(40), Kind: event.PodUnready, Source: "compose", Service: "order-gateway", Pod: pod, Reason: "unhealthy"},
		event.Event{At: sec(50), Kind: event.PodReady, Source: "compose", Service: "order-gateway", Pod: pod},
		event.Event{At: sec(60), Kind: event.EndpointRemoved, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod, Reason: "no router"},
		event.Event{At: sec(61), Kind: event.EndpointReady, Source: "traefik-accesslog", Service: "order-gateway", Pod: pod})
	var kept, unroutable []findings.Finding
	for _, f := range r.compute() {
		switch {
		case f.Rule == findings.RuleTraefikKeptRouting:
			kept = append(kept, f)
		case f.Kind == findings.KindUnroutable:
			unroutable = append(unroutable, f)
		}
	}
	if len(kept) != 1 || kept[0].Start != sec(40) || kept[0].End != sec(50) || kept[0].Severity != findings.Warning {
		t.Fatalf("kept-routing findings %+v, want one warning for 40-50 s", kept)
	}
	if w := "Docker reported drill-x-order-gateway unhealthy for 10.0 s (t=40.0-50.0 s) but Traefik kept routing order-gateway"; !strings.Contains(kept[0].Text, w) {
		t.Errorf("finding %q does not say %q", kept[0].Text, w)
	}
	if len(unroutable) != 2 {
		t.Fatalf("unroutable findings %+v, want 2", unroutable)
	}
	for _, f := range unroutable {
		if f.Start == sec(60) {
			if w := "Docker reported no unready health status before it began"; !strings.Contains(f.Text, w) {
				t.Errorf("the 60 s interval: %q does not say %q", f.Text, w)
			}
		}
		if strings.Contains(f.Text, "between") {
			t.Errorf("no since labels, yet the finding brackets the change: %q", f.Text)
		}
	}
}

// checkFinding fails t unless fd's text says each of texts and each named
// figure has its value.
func checkFinding(t *testing.T, fd *findings.Finding, texts []string, figures map[string]float64) {
	t.Helper()
	for _, w := range texts {
		if !strings.Contains(fd.Text, w) {
			t.Errorf("finding does not say %q:\n%s", w, fd.Text)
		}
	}
	got := map[string]float64{}
	for _, f := range fd.Figures {
		got[f.Name] = f.Value
	}
	for name, v := range figures {
		if got[name] != v {
			t.Errorf("figure %s = %v, want %v (%s)", name, got[name], v, fd.Text)
		}
	}
}
