package refservices

import (
	"context"
	"encoding/json"
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
type fakeService struct {
	wg      sync.WaitGroup
	drained atomic.Bool
}

func (f *fakeService) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
}
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
