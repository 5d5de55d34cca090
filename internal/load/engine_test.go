package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// runStreams runs streams to the end and returns the engine.
func runStreams(t *testing.T, clock *event.Clock, opts Options, streams ...scenario.Stream) *Engine {
	t.Helper()
	e, err := New(clock, streams, opts, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// generous lag budget: these tests share a busy machine.
var relaxed = &scenario.LagBudget{Late: dur(200 * time.Millisecond), Fraction: 0.2}

// TestCoordinatedOmissionCorrected: the server stalls for 1 s in the
// middle of a 2 s, 100/s stream. With vegeta's worker-pickup timing, a
// generator capped at 2 workers hides the stall (notes 2.7: p90 0.62 ms).
// Timed from the intended send time, the stall shows in both cases, and
// the capped generator is flagged as behind schedule.
func TestCoordinatedOmissionCorrected(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxWorkers int
		behind     bool
	}{
		{"default workers", 0, false},
		{"two workers", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := event.NewClock()
			stallFrom, stallTo := 500*time.Millisecond, 1500*time.Millisecond
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if now := clock.Now(); now >= stallFrom && now < stallTo {
					time.Sleep(stallTo - now)
				}
			}))
			defer srv.Close()
			e := runStreams(t, clock, Options{}, scenario.Stream{
				Name: "s", Targets: []scenario.Target{{URL: srv.URL}},
				Rate: rate(100, time.Second), Duration: dur(2 * time.Second),
				MaxWorkers: tc.maxWorkers, Timeout: dur(5 * time.Second), LagBudget: relaxed,
			})
			total := e.Series()["s"].Total()
			if total.Requests != 200 || total.Intended != 200 || total.OK != 200 {
				t.Fatalf("requests=%d intended=%d ok=%d, want 200 each", total.Requests, total.Intended, total.OK)
			}
			// About half the requests were due during the stall; p90 is
			// several hundred ms whatever the worker count.
			if p90 := total.Quantile(90); p90 < 300*time.Millisecond {
				t.Fatalf("p90 = %s: the stall is missing from the latency (coordinated omission)", p90)
			}
			if max := total.Max(); max < 800*time.Millisecond || max > 3*time.Second {
				t.Fatalf("max = %s, want about 1 s", max)
			}
			err := e.Validity()
			lagP99 := measure.Quantile(total.Lag, 99)
			if tc.behind {
				if !errors.Is(err, ErrBehindSchedule) {
					t.Fatalf("validity = %v, want ErrBehindSchedule", err)
				}
				if !strings.Contains(err.Error(), `stream "s"`) {
					t.Fatalf("error does not name the stream: %v", err)
				}
				if !strings.Contains(err.Error(), "most late requests were due in t=") {
					t.Fatalf("error does not say when the generator fell behind: %v", err)
				}
				// Both workers sat in the stalled server: the cap held the
				// hits back, and the message says so.
				if !strings.Contains(err.Error(), "all 2 workers (maxWorkers) were waiting for responses") {
					t.Fatalf("error does not blame the worker cap: %v", err)
				}
				if lagP99 < 300*time.Millisecond || total.Late == 0 {
					t.Fatalf("lag p99 = %s, late = %d; want the backlog recorded", lagP99, total.Late)
				}
			} else if err != nil {
				t.Fatalf("validity = %v (lag p99 %s)", err, lagP99)
			}
		})
	}
}

// TestBucketsAlignedToClock: a stream starting at 0.5 s puts its
// requests in buckets by intended time on the run's clock, 1 s wide from 0.
func TestBucketsAlignedToClock(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	clock := event.NewClock()
	e := runStreams(t, clock, Options{}, scenario.Stream{
		Name: "late-start", Targets: []scenario.Target{{URL: srv.URL}},
		Rate: rate(50, time.Second), Start: dur(500 * time.Millisecond), Duration: dur(time.Second), LagBudget: relaxed,
	})
	s := e.Series()["late-start"]
	if len(s.Buckets) != 2 {
		t.Fatalf("%d buckets, want 2 (0-1 s and 1-2 s)", len(s.Buckets))
	}
	var intended, requests int64
	for i, b := range s.Buckets {
		if b.Start != time.Duration(i)*time.Second || b.Width != time.Second {
			t.Fatalf("bucket %d spans %s+%s", i, b.Start, b.Width)
		}
		if b.Intended == 0 || b.Requests != b.Intended {
			t.Fatalf("bucket %d: intended %d, requests %d", i, b.Intended, b.Requests)
		}
		intended += b.Intended
		requests += b.Requests
	}
	if intended != 50 || requests != 50 {
		t.Fatalf("intended %d, requests %d; want 50", intended, requests)
	}
	// Windows cut on the plan's whole seconds.
	if w := s.Window(time.Second, 2*time.Second); w.Requests != s.Buckets[1].Requests {
		t.Fatalf("window 1-2 s has %d requests, bucket has %d", w.Requests, s.Buckets[1].Requests)
	}
	if err := e.Validity(); err != nil {
		t.Fatal(err)
	}
}

// TestSeveralStreamsAndTargets: two streams at once with their own rates;
// round-robin over inline targets and vegeta targets files (http, json);
// body templates get a unique id, the exact sequence number and the
// intended send time.
func TestSeveralStreamsAndTargets(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	ids := map[string]bool{}
	var badBody []string
	clock := event.NewClock()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		paths[r.Header.Get("X-Vegeta-Attack")+" "+r.Method+" "+r.URL.Path]++
		if r.URL.Path == "/tpl" {
			var v struct {
				ID   string
				Seq  uint64
				Time time.Time
			}
			if err := json.Unmarshal(body, &v); err != nil || ids[v.ID] ||
				strconv.FormatUint(v.Seq, 10) != r.Header.Get("X-Vegeta-Seq") ||
				r.Header.Get(tplHeader) != "" || clock.Offset(v.Time) > clock.Now() {
				badBody = append(badBody, string(body)+" seq="+r.Header.Get("X-Vegeta-Seq"))
			}
			ids[v.ID] = true
		}
		_, _ = io.WriteString(w, "hello")
	}))
	defer srv.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "t.http"), "GET "+srv.URL+"/file-a\nX-A: 1\n\nPOST "+srv.URL+"/file-b\n")
	writeFile(t, filepath.Join(dir, "t.json"), `{"method":"PUT","url":"`+srv.URL+`/json"}`+"\n")

	e := runStreams(t, clock, Options{Dir: dir, RunID: "run1"},
		scenario.Stream{
			Name: "mixed", Rate: rate(120, time.Second), Duration: dur(time.Second), LagBudget: relaxed,
			Targets: []scenario.Target{{Method: "post", URL: srv.URL + "/tpl",
				Body: `{"ID":"{{.ID}}","Seq":{{.Seq}},"Time":"{{.Time}}"}`}},
			TargetsFile: &scenario.TargetsFile{Path: "t.http"},
		},
		scenario.Stream{
			Name: "json", Rate: rate(30, time.Second), Duration: dur(time.Second), LagBudget: relaxed,
			TargetsFile: &scenario.TargetsFile{Path: "t.json", Format: "json"},
		},
	)
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"mixed POST /tpl": 40, "mixed GET /file-a": 40, "mixed POST /file-b": 40, "json PUT /json": 30}
	for k, v := range want {
		if paths[k] != v {
			t.Errorf("%s: %d requests, want %d (all: %v)", k, paths[k], v, paths)
		}
	}
	if len(badBody) > 0 {
		t.Fatalf("bad template bodies: %v", badBody)
	}
	for id := range ids {
		if !strings.HasPrefix(id, "run1-mixed-") {
			t.Fatalf("id %q lacks the run and stream prefix", id)
		}
	}
	m := e.Series()["mixed"].Total()
	if m.BytesIn != 120*5 || m.BytesOut == 0 {
		t.Fatalf("bytes in %d (want 600), out %d", m.BytesIn, m.BytesOut)
	}
}

// TestLargerThanConnectionBuffers: request and response heads and bodies
// larger than each connection's buffers (connBufferSize) go through whole:
// a 3 KiB request header and 8 KiB body, a 3 KiB response header and
// 100 KiB body, on kept-alive connections.
func TestLargerThanConnectionBuffers(t *testing.T) {
	const respBody = 100 << 10
	long := strings.Repeat("x", 3*connBufferSize)
	reqBody := strings.Repeat("b", 8*connBufferSize)
	var mu sync.Mutex
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Long") != long || string(body) != reqBody {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("header %d bytes, body %d bytes", len(r.Header.Get("X-Long")), len(body)))
			mu.Unlock()
		}
		w.Header().Set("X-Long", long)
		_, _ = w.Write(make([]byte, respBody))
	}))
	defer srv.Close()
	e := runStreams(t, event.NewClock(), Options{},
		scenario.Stream{
			Name: "big", Rate: rate(50, time.Second), Duration: dur(time.Second), LagBudget: relaxed,
			Targets: []scenario.Target{{Method: "POST", URL: srv.URL + "/big", Headers: map[string]string{"X-Long": long}, Body: reqBody}},
		})
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("the server got %d requests cut short, first: %s", len(bad), bad[0])
	}
	m := e.Series()["big"].Total()
	if m.OK != 50 || m.BytesIn != 50*respBody {
		t.Fatalf("ok %d of %d, bytes in %d; want 50 ok, %d bytes in", m.OK, m.Requests, m.BytesIn, 50*respBody)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRetries: fixed-interval retries hit a failing server maxAttempts
// times (a retry storm); retry-after waits as told, or gives up and returns
// the shed answer when the wait does not fit in the timeout.
func TestRetries(t *testing.T) {
	tests := []struct {
		name        string
		retry       *scenario.Retry
		retryAfter  string
		firstOnly   bool // only the first attempt of each request fails
		wantHits    int64
		wantRetries int64
		wantCode    int
	}{
		{"none", nil, "", false, 10, 0, 503},
		{"fixed storm", &scenario.Retry{Policy: scenario.RetryFixed, Interval: dur(5 * time.Millisecond), MaxAttempts: 3}, "", false, 30, 20, 503},
		{"fixed recovers", &scenario.Retry{Policy: scenario.RetryFixed, Interval: dur(5 * time.Millisecond)}, "", true, 20, 10, 200},
		{"retry-after honoured", &scenario.Retry{Policy: scenario.RetryAfter, MaxAttempts: 2}, "0", true, 20, 10, 200},
		{"retry-after beyond timeout", &scenario.Retry{Policy: scenario.RetryAfter, MaxAttempts: 3}, "30", false, 10, 0, 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var hits int64
			seen := map[string]bool{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				seq := r.Header.Get("X-Vegeta-Seq")
				first := !seen[seq]
				seen[seq] = true
				mu.Unlock()
				if tc.firstOnly && !first {
					return
				}
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			e := runStreams(t, event.NewClock(), Options{}, scenario.Stream{
				Name: "r", Targets: []scenario.Target{{Method: "POST", URL: srv.URL, Body: "x"}},
				Rate: rate(10, time.Second), Duration: dur(time.Second), Timeout: dur(2 * time.Second),
				Retry: tc.retry, LagBudget: relaxed,
			})
			b := e.Series()["r"].Total()
			mu.Lock()
			defer mu.Unlock()
			if hits != tc.wantHits {
				t.Fatalf("server saw %d attempts, want %d", hits, tc.wantHits)
			}
			if b.Retries != tc.wantRetries || b.Requests != 10 || b.Codes[tc.wantCode] != 10 {
				t.Fatalf("retries %d (want %d), requests %d, codes %v", b.Retries, tc.wantRetries, b.Requests, b.Codes)
			}
			if tc.wantCode == 503 {
				if b.Shed.TotalCount() != 10 {
					t.Fatalf("shed histogram has %d, want 10", b.Shed.TotalCount())
				}
				wantRA := int64(0)
				if tc.retryAfter != "" {
					wantRA = 10
				}
				if b.ShedRetryAfter != wantRA {
					t.Fatalf("shed with Retry-After %d, want %d", b.ShedRetryAfter, wantRA)
				}
			}
		})
	}
}

// TestErrorKinds: refused, reset and timeout are told apart; none is dropped.
func TestErrorKinds(t *testing.T) {
	// A port with nothing listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String()
	ln.Close()

	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_ = conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	defer reset.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()

	tests := []struct {
		url, kind string
		timeout   time.Duration
	}{
		{fullBacklog(t), measure.ErrDialTimeout, 200 * time.Millisecond},
		{closedURL, measure.ErrRefused, 3 * time.Second},
		{reset.URL, measure.ErrReset, 3 * time.Second},
		{slow.URL, measure.ErrTimeout, 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			e := runStreams(t, event.NewClock(), Options{}, scenario.Stream{
				Name: "e", Targets: []scenario.Target{{URL: tc.url}}, Rate: rate(10, time.Second),
				Duration: dur(500 * time.Millisecond), Timeout: dur(tc.timeout), LagBudget: relaxed,
			})
			b := e.Series()["e"].Total()
			if b.Requests != 5 || b.Errors[tc.kind] != 5 || b.Failures() != 5 {
				t.Fatalf("requests %d, errors %v; want 5 %s", b.Requests, b.Errors, tc.kind)
			}
			if tc.kind == measure.ErrTimeout {
				if p50 := b.Quantile(50); p50 < 200*time.Millisecond {
					t.Fatalf("timeout latency p50 %s, want >= the 200ms timeout", p50)
				}
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for msg, want := range map[string]string{
		`Get "http://127.0.0.1:1": dial tcp 127.0.0.1:1: connect: connection refused`:       measure.ErrRefused,
		`Get "http://x": read tcp 127.0.0.1:5->127.0.0.1:6: read: connection reset by peer`: measure.ErrReset,
		`Get "http://x": EOF`: measure.ErrReset,
		`Get "http://x": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`: measure.ErrTimeout,
		`context deadline exceeded (Client.Timeout or context cancellation while reading body)`:      measure.ErrTimeout,
		`Get "http://x": dial tcp: lookup nowhere.invalid: no such host`:                             measure.ErrUnreachable,
		`Get "http://x": dial tcp 127.0.0.1:9: i/o timeout`:                                          measure.ErrDialTimeout,
		`Get "http://x": dial tcp 192.0.2.1:80: connect: no route to host`:                           measure.ErrUnreachable,
		`Get "http://x": context deadline exceeded; ` + noConnection:                                 measure.ErrDialTimeout,
		`Get "http://x": something else`:                                                             measure.ErrOther,
		`Get "http://127.0.0.1:5/": dial tcp 127.0.0.1:5: socket: too many open files`:               measure.ErrGeneratorFiles,
	} {
		if got := classify(msg); got != want {
			t.Errorf("classify(%q) = %s, want %s", msg, got, want)
		}
	}
}

func TestNewRejectsBadStreams(t *testing.T) {
	good := scenario.Target{URL: "http://127.0.0.1:1/"}
	tests := []struct {
		name string
		st   scenario.Stream
		want string
	}{
		{"no name", scenario.Stream{Targets: []scenario.Target{good}, Rate: rate(1, time.Second), Duration: dur(time.Second)}, "name is required"},
		{"no targets", scenario.Stream{Name: "a", Rate: rate(1, time.Second), Duration: dur(time.Second)}, "no targets"},
		{"relative url", scenario.Stream{Name: "a", Targets: []scenario.Target{{URL: "/x"}}, Rate: rate(1, time.Second), Duration: dur(time.Second)}, "absolute"},
		{"bad template", scenario.Stream{Name: "a", Targets: []scenario.Target{{URL: good.URL, Body: "{{.Nope}}"}}, Rate: rate(1, time.Second), Duration: dur(time.Second)}, "body template"},
		{"missing file", scenario.Stream{Name: "a", TargetsFile: &scenario.TargetsFile{Path: "/nonexistent/t.http"}, Rate: rate(1, time.Second), Duration: dur(time.Second)}, "read targets file"},
		{"no duration", scenario.Stream{Name: "a", Targets: []scenario.Target{good}, Rate: rate(1, time.Second)}, "duration"},
		{"bad retry", scenario.Stream{Name: "a", Targets: []scenario.Target{good}, Rate: rate(1, time.Second), Duration: dur(time.Second), Retry: &scenario.Retry{Policy: "often"}}, "unknown policy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(event.NewClock(), []scenario.Stream{tc.st}, Options{}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestCancelStopsSending: ctx cancel stops new requests; intended counts
// end at the cancel, so a stopped stream is not judged behind schedule.
func TestCancelStopsSending(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	clock := event.NewClock()
	e, err := New(clock, []scenario.Stream{{
		Name: "c", Targets: []scenario.Target{{URL: srv.URL}}, Rate: rate(100, time.Second),
		Duration: dur(time.Minute), LagBudget: relaxed,
	}, {
		Name: "never", Targets: []scenario.Target{{URL: srv.URL}}, Rate: rate(100, time.Second),
		Start: dur(time.Hour), Duration: dur(time.Second),
	}}, Options{}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	// Wait for the stream to be running and to have sent something.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if l := e.Live(time.Second); l[0].Sent > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stream sent nothing")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	s := e.Series()
	total := s["c"].Total()
	if total.Requests < 100 || total.Requests > 3000 {
		t.Fatalf("%d requests", total.Requests)
	}
	// Hits due at the cancel may not have gone out yet on a busy machine.
	if d := total.Intended - total.Requests; d < 0 || d > 20 {
		t.Fatalf("intended %d vs requests %d after cancel", total.Intended, total.Requests)
	}
	if len(s["never"].Buckets) != 0 {
		t.Fatal("a stream that never started has buckets")
	}
	if err := e.Validity(); err != nil {
		t.Fatal(err)
	}
	live := e.Live(5 * time.Second)
	if live[0].State != "done" || live[1].State != "skipped" {
		t.Fatalf("states %s, %s", live[0].State, live[1].State)
	}
}

// TestCollapseGuardStopsStream: a generator whose lag reaches AbortLag
// stops its stream (no worker and connection storm) and the run is invalid.
func TestCollapseGuardStopsStream(t *testing.T) {
	clock := event.NewClock()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if now := clock.Now(); now < 2*time.Second {
			time.Sleep(2*time.Second - now)
		}
	}))
	defer srv.Close()
	e := runStreams(t, clock, Options{AbortLag: 300 * time.Millisecond}, scenario.Stream{
		Name: "c", Targets: []scenario.Target{{URL: srv.URL}}, Rate: rate(50, time.Second),
		Duration: dur(10 * time.Second), MaxWorkers: 2, LagBudget: relaxed,
	})
	total := e.Series()["c"].Total()
	if total.Requests >= 300 {
		t.Fatalf("%d requests: the stream was not stopped", total.Requests)
	}
	err := e.Validity()
	if !errors.Is(err, ErrBehindSchedule) || !strings.Contains(err.Error(), "collapsing") {
		t.Fatalf("validity = %v", err)
	}
}

// hostRouter sends every request to addr, counting them (a test Router).
type hostRouter struct {
	addr string
	n    atomic.Int64
}

func (h *hostRouter) RoundTripVia(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	h.n.Add(1)
	out := req.Clone(req.Context())
	out.URL.Host = h.addr
	return base.RoundTrip(out)
}

// TestRouters: requests to a routed host go through its Router (with the
// stream's transport); others are dialled as usual.
func TestRouters(t *testing.T) {
	var direct, routed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "svc.invalid:80" {
			routed.Add(1)
		} else {
			direct.Add(1)
		}
	}))
	defer srv.Close()
	router := &hostRouter{addr: strings.TrimPrefix(srv.URL, "http://")}
	e := runStreams(t, event.NewClock(), Options{Routers: map[string]Router{"svc.invalid:80": router}},
		scenario.Stream{
			Name: "s", Rate: rate(40, time.Second), Duration: dur(time.Second), LagBudget: relaxed,
			Targets: []scenario.Target{
				{Method: "GET", URL: "http://svc.invalid:80/a"},
				{Method: "GET", URL: srv.URL + "/b"},
			},
		},
	)
	if router.n.Load() != 20 || routed.Load() != 20 || direct.Load() != 20 {
		t.Fatalf("router %d, routed %d, direct %d; want 20 each", router.n.Load(), routed.Load(), direct.Load())
	}
	if tot := e.Series()["s"].Total(); tot.OK != 40 {
		t.Fatalf("%d ok of %d, want 40", tot.OK, tot.Requests)
	}
}

// connRouter is a test ConnRouter: per connection while perConn, it dials
// addr (or fails as refused when addr is empty), counting its dials and
// the requests it was handed per request.
type connRouter struct {
	hostRouter
	perConn bool
	dials   atomic.Int64
}

func (c *connRouter) BalancesPerConnection() bool { return c.perConn }

func (c *connRouter) DialVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	c.dials.Add(1)
	if c.addr == "" {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return dial(ctx, "tcp", c.addr)
}

// TestConnRouters: a router that balances per connection opens the
// stream's connections (kept alive, so far fewer dials than requests) and
// is never handed a request; its requests keep the Service's Host; with
// no endpoint its requests count as refused connections. A ConnRouter
// that balances per request is handed every request, as a Router is.
func TestConnRouters(t *testing.T) {
	var hosts sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host, true)
	}))
	defer srv.Close()
	backend := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name      string
		router    *connRouter
		ok        int64
		refused   int64
		perRouter int64 // requests handed to RoundTripVia
	}{
		{"per connection", &connRouter{hostRouter: hostRouter{addr: backend}, perConn: true}, 40, 0, 0},
		{"per connection, no endpoint", &connRouter{perConn: true}, 0, 40, 0},
		{"per request", &connRouter{hostRouter: hostRouter{addr: backend}}, 40, 0, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := runStreams(t, event.NewClock(), Options{Routers: map[string]Router{"svc.invalid:80": tc.router}},
				scenario.Stream{
					Name: "s", Rate: rate(40, time.Second), Duration: dur(time.Second), LagBudget: relaxed,
					Targets: []scenario.Target{{Method: "GET", URL: "http://svc.invalid:80/a"}},
				},
			)
			tot := e.Series()["s"].Total()
			if tot.OK != tc.ok || tot.Errors[measure.ErrRefused] != tc.refused || tc.router.n.Load() != tc.perRouter {
				t.Fatalf("ok %d, refused %d, handed to RoundTripVia %d (errors %v); want %d, %d, %d",
					tot.OK, tot.Errors[measure.ErrRefused], tc.router.n.Load(), tot.Errors, tc.ok, tc.refused, tc.perRouter)
			}
			if tc.router.perConn && tc.ok > 0 {
				if d := tc.router.dials.Load(); d < 1 || d >= tc.ok {
					t.Errorf("%d dials for %d requests: want at least one and fewer than the requests (kept-alive connections)", d, tc.ok)
				}
				if _, ok := hosts.Load("svc.invalid:80"); !ok {
					t.Error("the backend never saw the Service's Host header")
				}
			}
		})
	}
}

// fullBacklog returns the URL of a loopback listener that never accepts and
// whose accept queue is full, so that a new connection is never
// established: the kernel drops its SYNs and the dial hangs until the
// client gives up.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the accept queue (its length is the backlog + 1) and keep the
	// connections open.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
		if i > 16 {
			t.Skip("the kernel keeps accepting connections for a listener with backlog 0; cannot make a dial hang")
		}
	}
	return "http://" + addr
}

// TestBasicAuth: a stream's basicAuth reaches every request of every
// target (inline and from a targets file) as RFC 7617 credentials.
func TestBasicAuth(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		mu.Lock()
		got[fmt.Sprintf("%s %v %s:%s", r.URL.Path, ok, u, p)]++
		mu.Unlock()
	}))
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "targets.txt"), []byte("GET "+srv.URL+"/file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, st := range []scenario.Stream{
		{Name: "inline", Targets: []scenario.Target{{URL: srv.URL + "/inline"}}},
		{Name: "file", TargetsFile: &scenario.TargetsFile{Path: "targets.txt"}},
	} {
		st.Rate, st.Duration, st.LagBudget = rate(20, time.Second), dur(500*time.Millisecond), relaxed
		st.BasicAuth = &scenario.BasicAuth{Username: "drill", Password: "s3cret:with:colons"}
		runStreams(t, event.NewClock(), Options{Dir: dir}, st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got["/inline true drill:s3cret:with:colons"] == 0 || got["/file true drill:s3cret:with:colons"] == 0 {
		t.Errorf("requests seen (path, basic auth, credentials): %v", got)
	}
}

// TestSecondsJournal: with Options.Seconds, every second of a real run
// against a loopback server reaches the journal once, contiguous, with
// Intended and Requests adding up to the schedule's hits, and the engine
// still reports the run valid.
func TestSecondsJournal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), measure.SecondsFile)
	j, err := measure.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := event.NewClock()
	e := runStreams(t, clock, Options{Seconds: j}, scenario.Stream{
		Name: "orders", Targets: []scenario.Target{{URL: srv.URL}},
		Rate: rate(100, time.Second), Duration: dur(3 * time.Second), LagBudget: relaxed,
	})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.SecondsErr(); err != nil {
		t.Fatal(err)
	}
	series, err := measure.LoadSeries(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last second held is the one holding the stream's end (a little
	// after t=3 s), as Series has it.
	held := e.Series()["orders"]
	s := series["orders"]
	if s == nil || len(s.Buckets) < 3 || len(s.Buckets) != len(held.Buckets) {
		t.Fatalf("journal series: %+v, want the %d seconds the engine holds", s, len(held.Buckets))
	}
	var intended, requests int64
	for i, b := range s.Buckets {
		if b.Start != time.Duration(i)*time.Second {
			t.Fatalf("second %d starts at %s", i, b.Start)
		}
		intended += b.Intended
		requests += b.Requests
	}
	if intended != 300 || requests != 300 {
		t.Fatalf("journal: intended %d, requests %d; want 300", intended, requests)
	}
	if err := e.Validity(); err != nil {
		t.Fatal(err)
	}
}

// TestOnLate: Options.OnLate is called once, for the stream that fell
// behind, when its late requests reach LateHookAfter, with a time inside
// the stream; a stream on schedule never calls it.
func TestOnLate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(10 * time.Millisecond)
		}
	}))
	defer srv.Close()
	type call struct {
		stream string
		at     time.Duration
	}
	calls := make(chan call, 10)
	tight := &scenario.LagBudget{Late: dur(5 * time.Millisecond), Fraction: 0.01}
	e := runStreams(t, event.NewClock(), Options{OnLate: func(stream string, at time.Duration) { calls <- call{stream, at} }},
		scenario.Stream{
			// One worker for 200 hits a second that each take 10 ms: most
			// go out late.
			Name: "behind", Targets: []scenario.Target{{URL: srv.URL + "/slow"}}, Rate: rate(200, time.Second),
			Duration: dur(time.Second), MaxWorkers: 1, Timeout: dur(time.Second), LagBudget: tight,
		},
		scenario.Stream{
			Name: "fine", Targets: []scenario.Target{{URL: srv.URL + "/fast"}}, Rate: rate(5, time.Second),
			Duration: dur(time.Second), Timeout: dur(time.Second), LagBudget: relaxed,
		})
	if late := e.Series()["behind"].Total().Late; late < LateHookAfter {
		t.Fatalf("only %d late requests; the test needs %d", late, LateHookAfter)
	}
	select {
	case c := <-calls:
		if c.stream != "behind" || c.at <= 0 || c.at > 2*time.Second {
			t.Fatalf("OnLate(%q, %s), want the stream behind and a time within it", c.stream, c.at)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLate was not called")
	}
	select {
	case c := <-calls:
		t.Fatalf("OnLate called again: %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
}
