package ordergateway

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

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/refservices"
	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

func TestOrderID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want, wantErr string
	}{
		{"string", `{"id":"o-1","amount":3}`, "o-1", ""},
		{"number", `{"id":42}`, "42", ""},
		{"missing", `{"amount":3}`, "", "id is required"},
		{"null", `{"id":null}`, "", "id is required"},
		{"empty", `{"id":""}`, "", "must not be empty"},
		{"object", `{"id":{}}`, "", "string or a number"},
		{"not json", `id=1`, "", "decode order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := orderID([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("orderID(%s) error = %v, want one containing %q", tt.body, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("orderID(%s) = %q, %v; want %q", tt.body, got, err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr []string
	}{
		{"defaults", func(*Config) {}, nil},
		{"no dsn", func(c *Config) { c.DatabaseURL = "" }, []string{"--database-url"}},
		{"bad build", func(c *Config) { c.Build = "fast" }, []string{`--build: unknown build "fast"; available: correct, naive`}},
		{"bad pressure", func(c *Config) { c.Pressure = "loose" }, []string{`--ready-pressure: unknown mode "loose"`}},
		{"several", func(c *Config) { c.PoolSize = -1; c.PressureThreshold = 2; c.Warmup = -time.Second },
			[]string{"--pool-size", "--pressure-threshold", "--warmup"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Config{DatabaseURL: "postgres://x@127.0.0.1:1/db"}
			tt.mod(&c)
			c.SetDefaults()
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestBuildDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		build        refservices.Build
		inflight     int
		dbTimeout    time.Duration
		wantInflight int
		wantTimeout  time.Duration
	}{
		{refservices.BuildCorrect, 0, 0, DefaultMaxInFlight, DefaultDBTimeout},
		{refservices.BuildNaive, 0, 0, Unlimited, NoTimeout},
		{refservices.BuildNaive, 64, time.Second, 64, time.Second},
		{refservices.BuildCorrect, -5, -time.Second, Unlimited, NoTimeout},
	}
	for _, tt := range tests {
		c := Config{Build: tt.build, MaxInFlight: tt.inflight, DBTimeout: tt.dbTimeout}
		c.SetDefaults()
		if c.MaxInFlight != tt.wantInflight || c.DBTimeout != tt.wantTimeout {
			t.Errorf("%s build, inflight %d, db timeout %s: defaults to %d, %s; want %d, %s",
				tt.build, tt.inflight, tt.dbTimeout, c.MaxInFlight, c.DBTimeout, tt.wantInflight, tt.wantTimeout)
		}
	}
}

// TestPressureCheck covers the three modes of the MC-PS-01 / ADR 0077
// decision without a database.
func TestPressureCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		mode      PressureMode
		inflight  int64
		lastOKAgo time.Duration // < 0: never
		wantFail  bool
	}{
		{"stalled below threshold", PressureStalled, 89, -1, false},
		{"stalled at threshold but draining", PressureStalled, 90, 10 * time.Millisecond, false},
		{"stalled at threshold, no write for long", PressureStalled, 95, 5 * time.Second, true},
		{"stalled at threshold, never written", PressureStalled, 100, -1, true},
		{"strict below", PressureStrict, 89, -1, false},
		{"strict at threshold though draining", PressureStrict, 90, 10 * time.Millisecond, true},
		{"off full and stalled", PressureOff, 100, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Config{DatabaseURL: "postgres://x@127.0.0.1:1/db", MaxInFlight: 100, Pressure: tt.mode, PressureWindow: time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.inflight.Store(tt.inflight)
			if tt.lastOKAgo >= 0 {
				s.base = time.Now().Add(-time.Hour)
				s.lastOK.Store(int64(time.Since(s.base) - tt.lastOKAgo))
			}
			err = s.pressureCheck(context.Background())
			if (err != nil) != tt.wantFail {
				t.Fatalf("pressureCheck() = %v, want failure %v", err, tt.wantFail)
			}
		})
	}
}

func startGateway(t *testing.T, cfg Config) (*Service, string) {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, refservicestest.Run(t, s)
}

// TestOrdersAreWritten: the request path writes orders and the correct
// build starts; several replicas create the table concurrently.
func TestOrdersAreWritten(t *testing.T) {
	pg := testutil.Postgres(t)
	const replicas = 3
	urls := make([]string, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		_, urls[i] = startGateway(t, Config{DatabaseURL: pg.DSN})
	}
	for _, u := range urls {
		refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
	}
	const perReplica = 20
	for i, u := range urls {
		for j := range perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := refservicestest.Do(http.MethodPost, u+"/orders", fmt.Sprintf(`{"id":"o-%d-%d","amount_cents":100}`, i, j), 5*time.Second)
				if r.Status != http.StatusCreated {
					t.Errorf("POST /orders: status %d body %q err %v", r.Status, r.Body, r.Err)
				}
			}()
		}
	}
	wg.Wait()
	r := refservicestest.Do(http.MethodPost, urls[0]+"/orders", `{"amount_cents":100}`, 5*time.Second)
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Body, CodeInvalid) {
		t.Errorf("POST /orders without id: status %d body %q, want 400 %s", r.Status, r.Body, CodeInvalid)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != replicas*perReplica {
		t.Errorf("orders in the table = %d, want %d", n, replicas*perReplica)
	}
}

// TestRequestPaths: the group-commit writer (the default) and one INSERT
// per request (--max-batch 1) both write every order once.
func TestRequestPaths(t *testing.T) {
	pg := testutil.Postgres(t)
	for _, tc := range []struct {
		name     string
		cfg      Config
		batched  bool
		statuses int
	}{
		{"group commit", Config{DatabaseURL: pg.DSN, MaxBatch: 16}, true, http.StatusCreated},
		{"per request", Config{DatabaseURL: pg.DSN, Build: refservices.BuildNaive, MaxBatch: 1}, false, http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u := startGateway(t, tc.cfg)
			// (the naive build answers every health path with its deep check)
			refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
			const n = 100
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := refservicestest.Do(http.MethodPost, u+"/orders", fmt.Sprintf(`{"id":"%s-%d"}`, tc.name, i), 5*time.Second)
					if r.Status != tc.statuses {
						t.Errorf("POST /orders: %d %q %v", r.Status, r.Body, r.Err)
					}
				}()
			}
			wg.Wait()
			if tc.batched != (s.batch != nil) {
				t.Fatalf("batch writer present = %v, want %v", s.batch != nil, tc.batched)
			}
			m := metricsText(t, u)
			wantBatched := "orders_batched_total 0"
			if tc.batched {
				wantBatched = fmt.Sprintf("orders_batched_total %d", n)
			}
			if !strings.Contains(m, wantBatched) || !strings.Contains(m, fmt.Sprintf(`orders_total{result="created"} %d`, n)) {
				t.Errorf("metrics lack %q or %d created:\n%s", wantBatched, n, m)
			}
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var got int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE order_id LIKE $1", tc.name+"-%").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != n {
				t.Errorf("orders written = %d, want %d", got, n)
			}
		})
	}
}

func metricsText(t *testing.T, u string) string {
	t.Helper()
	r := refservicestest.Do(http.MethodGet, u+"/metrics", "", 5*time.Second)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", r.Status, r.Err)
	}
	return r.Body
}

// TestCorrectBuildUnderDatabasePause is the INC-3119 drill in small: with
// PostgreSQL black-holed, liveness stays 200 without delay, readiness fails
// fast (its 250 ms timeout), orders fail with 503 within their deadline,
// and everything recovers when the pause ends.
func TestCorrectBuildUnderDatabasePause(t *testing.T) {
	pg := testutil.Postgres(t)
	px := refservicestest.Toxiproxy(t, pg.Addr)
	_, u := startGateway(t, Config{DatabaseURL: px.DSN(t, pg.DSN)})
	refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
	refservicestest.WaitStatus(t, u+refservices.PathReady, http.StatusOK, 5*time.Second)
	if r := refservicestest.Do(http.MethodPost, u+"/orders", `{"id":"before"}`, 5*time.Second); r.Status != http.StatusCreated {
		t.Fatalf("POST /orders before the pause: %d %q %v", r.Status, r.Body, r.Err)
	}

	px.Pause(t)
	// An order in flight during the pause fails at its deadline.
	order := make(chan refservicestest.Response, 1)
	go func() { order <- refservicestest.Do(http.MethodPost, u+"/orders", `{"id":"during"}`, 10*time.Second) }()

	for i := range 3 {
		live := refservicestest.Do(http.MethodGet, u+refservices.PathLive, "", 2*time.Second)
		if live.Status != http.StatusOK || live.Elapsed > time.Second {
			t.Errorf("liveness %d during the pause: status %d in %s (err %v), want 200 at once", i, live.Status, live.Elapsed, live.Err)
		}
		ready := refservicestest.Do(http.MethodGet, u+refservices.PathReady, "", 2*time.Second)
		if ready.Status != http.StatusServiceUnavailable || ready.Elapsed > 900*time.Millisecond {
			t.Errorf("readiness %d during the pause: status %d in %s (err %v), want 503 within its 250 ms timeout", i, ready.Status, ready.Elapsed, ready.Err)
		}
		if !strings.Contains(ready.Body, "database") {
			t.Errorf("readiness body %q does not name the failing database check", ready.Body)
		}
	}
	// Startup stays 200 for life once started.
	if r := refservicestest.Do(http.MethodGet, u+refservices.PathStartup, "", 2*time.Second); r.Status != http.StatusOK {
		t.Errorf("startup during the pause: %d, want 200 (started is for life)", r.Status)
	}
	r := <-order
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Body, CodeDBTimeout) || r.Elapsed > 4*time.Second {
		t.Errorf("order during the pause: status %d body %q after %s, want 503 %s after about 1s", r.Status, r.Body, r.Elapsed, CodeDBTimeout)
	}

	px.Resume(t)
	refservicestest.WaitStatus(t, u+refservices.PathReady, http.StatusOK, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := refservicestest.Do(http.MethodPost, u+"/orders", `{"id":"after"}`, 5*time.Second)
		if r.Status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orders after the pause still fail: %d %q", r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNaiveBuildBlocksUnderDatabasePause: the naive /health queries
// through the request pool without a timeout of its own, so a 1 s prober
// times out on it during the pause (what makes the kubelet restart the
// replica), and it answers again after.
func TestNaiveBuildBlocksUnderDatabasePause(t *testing.T) {
	pg := testutil.Postgres(t)
	px := refservicestest.Toxiproxy(t, pg.Addr)
	_, u := startGateway(t, Config{DatabaseURL: px.DSN(t, pg.DSN), Build: refservices.BuildNaive})
	refservicestest.WaitStatus(t, u+"/health", http.StatusOK, 20*time.Second)

	px.Pause(t)
	for _, path := range []string{"/health", refservices.PathLive} {
		r := refservicestest.Do(http.MethodGet, u+path, "", time.Second)
		if r.Err == nil {
			t.Errorf("naive %s during the pause answered %d %q; want it to block past the 1s probe timeout", path, r.Status, r.Body)
		}
	}
	px.Resume(t)
	refservicestest.WaitStatus(t, u+"/health", http.StatusOK, 10*time.Second)
}

// TestDrainOnShutdown: refservices.Serve fails readiness and stops cleanly when
// its context ends.
func TestServeDrains(t *testing.T) {
	pg := testutil.Postgres(t)
	s, err := New(Config{DatabaseURL: pg.DSN}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Health().Started() {
		t.Fatal("started before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	ln := listen(t)
	go func() { errc <- refservices.Serve(ctx, nil, ln, s, 5*time.Second) }()
	u := "http://" + ln.Addr().String()
	refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
	s.Drain()
	r := refservicestest.Do(http.MethodGet, u+refservices.PathReady, "", time.Second)
	var body map[string]any
	_ = json.Unmarshal([]byte(r.Body), &body)
	if r.Status != http.StatusServiceUnavailable || body["status"] != "draining" {
		t.Errorf("readiness after Drain: %d %q, want 503 draining", r.Status, r.Body)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve() = %v, want nil after a clean shutdown", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return within 15s of cancel")
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestColdStartGrowsWithOrders: with --warmup-rate, a replica on an empty
// table is warm at once, and one started after orders were written warms
// up for count/rate: its startup probe (correct: 503 "starting", while
// liveness answers 200) or its one deep /health (naive, which liveness
// also reads: 503 "warming up") fails meanwhile. Checked by order of
// answers, with generous waits.
func TestColdStartGrowsWithOrders(t *testing.T) {
	pg := testutil.Postgres(t)
	// The first replica: empty table, warm at once; it writes 40 orders.
	_, u := startGateway(t, Config{DatabaseURL: pg.DSN, WarmupRate: 10})
	refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
	for i := range 40 {
		if r := refservicestest.Do(http.MethodPost, u+"/orders", fmt.Sprintf(`{"id":"cold-%d"}`, i), 5*time.Second); r.Status != http.StatusCreated {
			t.Fatalf("order %d: %d %q", i, r.Status, r.Body)
		}
	}
	// Replicas started now count 40 orders at 10/s: 4 s of warm-up.
	for _, tc := range []struct {
		build      refservices.Build
		path, body string
	}{{refservices.BuildCorrect, refservices.PathStartup, "starting"}, {refservices.BuildNaive, "/health", "warming up"}} {
		t.Run(string(tc.build), func(t *testing.T) {
			_, u := startGateway(t, Config{DatabaseURL: pg.DSN, Build: tc.build, WarmupRate: 10})
			var warming bool
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && !warming {
				r := refservicestest.Do(http.MethodGet, u+tc.path, "", time.Second)
				warming = r.Status == http.StatusServiceUnavailable && strings.Contains(r.Body, tc.body)
				time.Sleep(50 * time.Millisecond)
			}
			if !warming {
				t.Fatalf("%s never answered 503 %s in the first 3 s of a 4 s warm-up", tc.path, tc.body)
			}
			if tc.build == refservices.BuildCorrect {
				if r := refservicestest.Do(http.MethodGet, u+refservices.PathLive, "", time.Second); r.Status != http.StatusOK {
					t.Errorf("liveness while warming up: %d %q, want 200 (no I/O, MC-PS-01)", r.Status, r.Body)
				}
			}
			refservicestest.WaitStatus(t, u+tc.path, http.StatusOK, 30*time.Second)
		})
	}
}

// TestVendorOutOfReadiness (HEALTH-ORD-001 INV-HLT-03, MC-CF-01): with a
// vendor API that hangs, the correct build stays ready and live and
// accepts orders as payment_pending (its vendor call is bounded, then its
// breaker opens); the naive build's orders and its one deep /health, which
// both wait for the vendor, do not answer within 1 s, and /health answers
// 503 once the vendor fails fast.
func TestVendorOutOfReadiness(t *testing.T) {
	pg := testutil.Postgres(t)
	hang := make(chan struct{})
	var failing atomic.Bool
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer vendor.Close()
	defer close(hang)
	_, correct := startGateway(t, Config{DatabaseURL: pg.DSN, VendorURL: vendor.URL})
	_, naive := startGateway(t, Config{DatabaseURL: pg.DSN, VendorURL: vendor.URL, Build: refservices.BuildNaive})
	refservicestest.WaitStatus(t, correct+refservices.PathStartup, http.StatusOK, 20*time.Second)
	for _, path := range []string{refservices.PathReady, refservices.PathLive} {
		if r := refservicestest.Do(http.MethodGet, correct+path, "", time.Second); r.Status != http.StatusOK {
			t.Errorf("correct %s with a hanging vendor: %d %q %v, want 200", path, r.Status, r.Body, r.Err)
		}
	}
	for i := range breakerFailures + 2 {
		r := refservicestest.Do(http.MethodPost, correct+"/orders", fmt.Sprintf(`{"id":"vendor-%d"}`, i), 5*time.Second)
		if r.Status != http.StatusCreated || !strings.Contains(r.Body, "payment_pending") {
			t.Errorf("correct order %d with a hanging vendor: %d %q %v, want 201 payment_pending", i, r.Status, r.Body, r.Err)
		}
	}
	if r := refservicestest.Do(http.MethodGet, naive+"/health", "", time.Second); r.Err == nil {
		t.Errorf("naive /health with a hanging vendor answered %d %q within 1 s; want no answer", r.Status, r.Body)
	}
	if r := refservicestest.Do(http.MethodPost, naive+"/orders", `{"id":"naive-vendor"}`, time.Second); r.Err == nil {
		t.Errorf("naive order with a hanging vendor answered %d %q within 1 s; want no answer", r.Status, r.Body)
	}
	failing.Store(true)
	if r := refservicestest.Do(http.MethodGet, naive+"/health", "", 5*time.Second); r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Body, "vendor") {
		t.Errorf("naive /health with a failing vendor: %d %q %v, want 503 naming the vendor", r.Status, r.Body, r.Err)
	}
}

// TestBreaker walks the correct build's vendor breaker through its states
// on a made-up clock: closed, open after 5 failures in a row, one trial
// after 5 s, open again when it fails, closed when one succeeds.
func TestBreaker(t *testing.T) {
	var b breaker
	t0 := time.Unix(0, 0)
	for i := range breakerFailures - 1 {
		if !b.allow(t0) || b.done(t0, false) {
			t.Fatalf("failure %d: want allowed and no state change", i+1)
		}
	}
	if !b.allow(t0) || !b.done(t0, false) || !b.open() {
		t.Fatal("5th failure: want the breaker to open")
	}
	if b.allow(t0.Add(breakerOpenFor - time.Millisecond)) {
		t.Fatal("open breaker let a call through before breakerOpenFor")
	}
	t1 := t0.Add(breakerOpenFor)
	if !b.allow(t1) || b.allow(t1) {
		t.Fatal("after breakerOpenFor: want exactly one trial call at a time")
	}
	if b.done(t1, false) || !b.open() || b.allow(t1.Add(time.Second)) {
		t.Fatal("failed trial: want open again for breakerOpenFor")
	}
	t2 := t1.Add(breakerOpenFor)
	if !b.allow(t2) || !b.done(t2, true) || b.open() || !b.allow(t2) {
		t.Fatal("successful trial: want closed")
	}
}
