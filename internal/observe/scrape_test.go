package observe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drillhq/drill/internal/event"
)

// collect is a Sink that keeps events and lets a test wait for them.
type collect struct {
	mu     sync.Mutex
	events []event.Event
	ch     chan struct{}
}

func newCollect() *collect { return &collect{ch: make(chan struct{}, 1)} }

func (c *collect) Emit(e event.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

func (c *collect) snapshot() []event.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event.Event(nil), c.events...)
}

// waitFor waits until pred holds for the collected events (at most 20 s).
func (c *collect) waitFor(t *testing.T, what string, pred func([]event.Event) bool) []event.Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ev := c.snapshot()
		if pred(ev) {
			return ev
		}
		select {
		case <-c.ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; events:\n%s", what, dump(c.snapshot()))
		}
	}
}

func dump(ev []event.Event) string {
	var b strings.Builder
	for _, e := range ev {
		b.WriteString(fmtEvent(e))
		b.WriteByte('\n')
	}
	return b.String()
}

func count(ev []event.Event, f func(event.Event) bool) int {
	n := 0
	for _, e := range ev {
		if f(e) {
			n++
		}
	}
	return n
}

func metricServer(t *testing.T) (*httptest.Server, prometheus.Gauge, prometheus.Counter) {
	t.Helper()
	reg := prometheus.NewRegistry()
	active := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lane_active_workers", Help: "active", ConstLabels: prometheus.Labels{"lane": "tax"}})
	served := prometheus.NewCounter(prometheus.CounterOpts{Name: "requests_total", Help: "served"})
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "request_seconds", Help: "latency", Buckets: []float64{0.1, 1}})
	sum := prometheus.NewSummary(prometheus.SummaryOpts{Name: "work_seconds", Help: "work", Objectives: map[float64]float64{0.5: 0.05}})
	untyped := prometheus.NewUntypedFunc(prometheus.UntypedOpts{Name: "legacy_value", Help: "u"}, func() float64 { return 7 })
	reg.MustRegister(active, served, hist, sum, untyped)
	active.Set(3)
	served.Add(41)
	hist.Observe(0.05)
	hist.Observe(0.5)
	sum.Observe(2)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv, active, served
}

func find(ss []Sample, name string, labels map[string]string) (Sample, bool) {
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		match := true
		for k, v := range labels {
			if s.Labels[k] != v {
				match = false
			}
		}
		if match {
			return s, true
		}
	}
	return Sample{}, false
}

func TestScrapeAllFamilies(t *testing.T) {
	srv, _, _ := metricServer(t)
	s := &Scraper{Name: "gw", URL: srv.URL + "/metrics", Buckets: true, Clock: event.NewClock(), Sink: newCollect()}
	got, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	instance := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"lane_active_workers", map[string]string{"lane": "tax", "job": "gw", "instance": instance}, 3},
		{"requests_total", nil, 41},
		{"legacy_value", nil, 7},
		{"request_seconds_count", nil, 2},
		{"request_seconds_sum", nil, 0.55},
		{"request_seconds_bucket", map[string]string{"le": "0.1"}, 1},
		{"request_seconds_bucket", map[string]string{"le": "1"}, 2},
		{"request_seconds_bucket", map[string]string{"le": "+Inf"}, 2},
		{"work_seconds_count", nil, 1},
		{"work_seconds_sum", nil, 2},
		{"work_seconds", map[string]string{"quantile": "0.5"}, 2},
	}
	for _, tt := range tests {
		s, ok := find(got, tt.name, tt.labels)
		if !ok {
			t.Errorf("sample %s%v missing", tt.name, tt.labels)
			continue
		}
		if diff := s.Value - tt.want; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, s.Value, tt.want)
		}
	}
	if n := len(findAll(got, "request_seconds_bucket")); n != 3 {
		t.Errorf("%d buckets, want 3 (no duplicate +Inf)", n)
	}
}

func findAll(ss []Sample, name string) []Sample {
	var out []Sample
	for _, s := range ss {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func TestScrapeSelectedFamilies(t *testing.T) {
	srv, _, _ := metricServer(t)
	s := &Scraper{Name: "gw", URL: srv.URL, Families: []string{"lane_active_workers", "request_seconds"}, Clock: event.NewClock(), Sink: newCollect()}
	got, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	want := "lane_active_workers request_seconds_count request_seconds_sum"
	if strings.Join(names, " ") != want {
		t.Errorf("samples %v, want %s", names, want)
	}
}

func TestScraperRunEmitsAndSurvivesErrors(t *testing.T) {
	srv, active, _ := metricServer(t)
	var fail atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
			t.Errorf("Accept = %q", r.Header.Get("Accept"))
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer front.Close()

	sink := newCollect()
	s := &Scraper{Name: "gw", URL: front.URL, Interval: 20 * time.Millisecond, Timeout: 10 * time.Second, Families: []string{"lane_active_workers"}, Clock: event.NewClock(), Sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()

	isActive := func(v float64) func(event.Event) bool {
		return func(e event.Event) bool {
			return e.Kind == event.Metric && e.Metric == "lane_active_workers" && e.Value == v && e.Source == SourceScrape
		}
	}
	sink.waitFor(t, "active=3", func(ev []event.Event) bool { return count(ev, isActive(3)) > 0 })
	fail.Store(true)
	sink.waitFor(t, "up=0 twice", func(ev []event.Event) bool {
		return count(ev, func(e event.Event) bool { return e.Metric == "up" && e.Value == 0 }) >= 2
	})
	active.Set(1)
	fail.Store(false)
	ev := sink.waitFor(t, "active=1", func(ev []event.Event) bool { return count(ev, isActive(1)) > 0 })
	cancel()
	<-done

	notes := count(ev, func(e event.Event) bool { return e.Kind == event.Note && strings.Contains(e.Detail, "HTTP 503") })
	if notes != 1 {
		t.Errorf("%d failure notes, want 1 (repeats of the same error are folded):\n%s", notes, dump(ev))
	}
	if count(ev, func(e event.Event) bool { return e.Kind == event.Note && strings.Contains(e.Detail, "recovered after") }) != 1 {
		t.Errorf("no recovery note:\n%s", dump(ev))
	}
	for i := 1; i < len(ev); i++ {
		if ev[i].At < ev[i-1].At {
			t.Fatalf("events out of order at %d", i)
		}
	}
}

func TestScrapeBadBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("this is { not metrics\n"))
	}))
	defer srv.Close()
	s := &Scraper{Name: "x", URL: srv.URL, Clock: event.NewClock(), Sink: newCollect()}
	if _, err := s.Scrape(context.Background()); err == nil || !strings.Contains(err.Error(), "parse text exposition") {
		t.Fatalf("err = %v", err)
	}
}

func TestProber(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status.Load() == 0 {
			select { // hang until the prober gives up
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		if status.Load() == 302 {
			http.Redirect(w, r, "http://192.0.2.1/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	p := &Prober{Name: "ready", URL: srv.URL, Timeout: 5 * time.Second, Clock: event.NewClock(), Sink: newCollect()}
	tests := []struct {
		status int32
		ok     bool
		detail string
	}{
		{200, true, "HTTP 200"},
		{302, true, "HTTP 302"},
		{399, true, "HTTP 399"},
		{503, false, "HTTP 503"},
		{0, false, "deadline exceeded"},
	}
	for _, tt := range tests {
		status.Store(tt.status)
		p.Timeout = 5 * time.Second
		if tt.status == 0 {
			p.Timeout = 50 * time.Millisecond
		}
		e := p.Probe(context.Background())
		if e.Kind != event.ProbeResult || e.OK != tt.ok || !strings.Contains(e.Detail, tt.detail) || e.Probe != "ready" {
			t.Errorf("status %d: got %+v, want ok=%v detail~%q", tt.status, e, tt.ok, tt.detail)
		}
	}
}
