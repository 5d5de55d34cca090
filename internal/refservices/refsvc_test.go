package refservices

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseBuild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Build
		wantErr string
	}{
		{"", BuildCorrect, ""},
		{"correct", BuildCorrect, ""},
		{"naive", BuildNaive, ""},
		{"Naive", "", `unknown build "Naive"; available: correct, naive`},
	}
	for _, tt := range tests {
		got, err := ParseBuild(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ParseBuild(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBuild(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestWriteProblem(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	WriteProblem(rec, Problem{
		Status: http.StatusServiceUnavailable, Title: "Tax calculation bulkhead saturated",
		Code: "ERR_TAX_BULKHEAD_SATURATED", Extra: map[string]any{"lane": "tax_calc"},
	}, 4500*time.Millisecond)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
	if got := rec.Header().Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After %q, want 5 (4.5 s rounded up)", got)
	}
	if got := rec.Header().Get("Content-Type"); got != ProblemContentType {
		t.Errorf("Content-Type %q, want %s", got, ProblemContentType)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "about:blank", "title": "Tax calculation bulkhead saturated", "status": 503.0,
		"code": "ERR_TAX_BULKHEAD_SATURATED", "lane": "tax_calc"}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("body[%q] = %v, want %v (body %s)", k, body[k], v, rec.Body.String())
		}
	}
	if _, ok := body["detail"]; ok {
		t.Errorf("empty detail was written: %s", rec.Body.String())
	}

	rec = httptest.NewRecorder()
	WriteProblem(rec, Problem{Status: 400, Title: "Invalid"}, 0)
	if got := rec.Header().Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q without a retry delay, want none", got)
	}
}

func TestWatchdogStallsOnlyWhenStopped(t *testing.T) {
	t.Parallel()
	wd := NewWatchdog(5*time.Millisecond, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go wd.Run(ctx)
	time.Sleep(50 * time.Millisecond)
	if wd.Stalled() {
		t.Fatalf("a running watchdog reports a stall (age %s)", wd.Age())
	}
	wd.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for !wd.Stalled() {
		if time.Now().After(deadline) {
			t.Fatalf("stopped watchdog never stalled (age %s)", wd.Age())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHealthEndpoints(t *testing.T) {
	t.Parallel()
	wd := NewWatchdog(5*time.Millisecond, time.Minute)
	dbOK := false
	h := NewHealth(nil, wd, nil,
		Check{Name: "database", Run: func(context.Context) error {
			if dbOK {
				return nil
			}
			return context.DeadlineExceeded
		}})
	mux := http.NewServeMux()
	h.Register(mux)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	steps := []struct {
		dbOK     bool
		path     string
		want     int
		contains string
	}{
		{false, PathStartup, 503, "starting"},
		{false, PathLive, 200, "live"},
		{false, PathReady, 503, "database"},
		{true, PathStartup, 200, "started"},
		{false, PathStartup, 200, "started"}, // started is for life
		{false, PathReady, 503, "deadline exceeded"},
		{true, PathReady, 200, "ready"},
	}
	for i, st := range steps {
		dbOK = st.dbOK
		code, body := get(st.path)
		if code != st.want || !strings.Contains(body, st.contains) {
			t.Errorf("step %d: GET %s = %d %q, want %d containing %q", i, st.path, code, body, st.want, st.contains)
		}
	}
	h.Drain()
	if code, body := get(PathReady); code != 503 || !strings.Contains(body, "draining") {
		t.Errorf("readiness after Drain = %d %q, want 503 draining", code, body)
	}
}

// fakeService's Close waits for its background goroutine, like the real
// services.
// A request to /slow signals started and blocks until release is closed
// (both nil: it does not block).
type fakeService struct {
	wg         sync.WaitGroup
	drained    atomic.Bool
	exitAtOnce bool
	started    chan struct{}
	release    chan struct{}
}

func (f *fakeService) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" && f.release != nil {
			f.started <- struct{}{}
			<-f.release
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
func (f *fakeService) ExitsAtOnce() bool { return f.exitAtOnce }
func (f *fakeService) Start(ctx context.Context) {
	f.wg.Add(1)
	go func() { defer f.wg.Done(); <-ctx.Done() }()
}
func (f *fakeService) Drain() { f.drained.Store(true) }
func (f *fakeService) Close() { f.wg.Wait() }

func TestServe(t *testing.T) {
	t.Parallel()
	t.Run("clean shutdown drains", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		svc := &fakeService{}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- Serve(ctx, nil, ln, svc, time.Second) }()
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		select {
		case err := <-errc:
			if err != nil || !svc.drained.Load() {
				t.Errorf("Serve() = %v, drained %v; want nil and drained", err, svc.drained.Load())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after cancel")
		}
	})
	t.Run("server error returns without hanging", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		errc := make(chan error, 1)
		go func() { errc <- Serve(context.Background(), nil, ln, &fakeService{}, time.Second) }()
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "serve http") {
				t.Errorf("Serve() on a closed listener = %v, want a serve http error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve hung after the server failed")
		}
	})
}

// TestServeDrainsOrExitsAtOnce checks the two SIGTERM behaviours of
// HEALTH-ORD-001 MC-TR-01 by their order of events, not by time: the
// correct build keeps serving new requests on kept-alive connections while
// a request is in flight after SIGTERM, and returns once it finished; the
// naive build fails the request in flight and returns without waiting.
func TestServeDrainsOrExitsAtOnce(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T, svc *fakeService) (addr string, cancel context.CancelFunc, errc chan error) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc = make(chan error, 1)
		go func() { errc <- Serve(ctx, nil, ln, svc, 30*time.Second) }()
		return "http://" + ln.Addr().String(), cancel, errc
	}
	get := func(c *http.Client, url string) error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	t.Run("correct build drains", func(t *testing.T) {
		t.Parallel()
		svc := &fakeService{started: make(chan struct{}, 1), release: make(chan struct{})}
		addr, cancel, errc := start(t, svc)
		defer cancel()
		kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		if err := get(kept, addr+"/"); err != nil { // opens the kept-alive connection
			t.Fatal(err)
		}
		slow := make(chan error, 1)
		go func() { slow <- get(http.DefaultClient, addr+"/slow") }()
		<-svc.started
		cancel() // SIGTERM
		for i := range 5 {
			if err := get(kept, addr+"/"); err != nil {
				t.Fatalf("request %d on a kept-alive connection during the drain: %v", i, err)
			}
		}
		if !svc.drained.Load() {
			t.Error("readiness not failed (Drain not called) after SIGTERM")
		}
		select {
		case err := <-errc:
			t.Fatalf("Serve returned %v with a request in flight", err)
		default:
		}
		close(svc.release)
		if err := <-slow; err != nil {
			t.Errorf("request in flight at SIGTERM: %v, want it answered", err)
		}
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve() = %v, want nil", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Serve did not return after the drain went quiet")
		}
	})
	t.Run("naive build exits at once", func(t *testing.T) {
		t.Parallel()
		svc := &fakeService{exitAtOnce: true, started: make(chan struct{}, 1), release: make(chan struct{})}
		defer close(svc.release)
		addr, cancel, errc := start(t, svc)
		defer cancel()
		slow := make(chan error, 1)
		go func() { slow <- get(http.DefaultClient, addr+"/slow") }()
		<-svc.started
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve() = %v, want nil", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Serve waited for the request in flight")
		}
		if err := <-slow; err == nil {
			t.Error("request in flight at SIGTERM answered, want it failed by the exit")
		}
		if svc.drained.Load() {
			t.Error("naive build drained")
		}
	})
}
