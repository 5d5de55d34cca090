package ordergateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/refservices"
	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

// logBuffer is a slog handler's destination tests can read while the
// service writes to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitLog waits until the log holds want after position from, and returns
// the position after it.
func waitLog(t *testing.T, b *logBuffer, from int, want string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := b.String()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %s; log since:\n%s", want, within, s[from:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gatewayConns counts the request pool's connections in pg_stat_activity.
func gatewayConns(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", Name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPoolSizeAndOverflow: the request pool keeps its size, opens at most
// its overflow beyond it while every connection is busy (the ADR 0077
// "5 + 5" budget, here 2 + 2), and closes the overflow once the burst is
// over; PostgreSQL's own view counts the connections.
func TestPoolSizeAndOverflow(t *testing.T) {
	pg := testutil.Postgres(t)
	px := refservicestest.Toxiproxy(t, pg.Addr)
	logs := &logBuffer{}
	// No order deadline to speak of: pgx closes a connection whose query
	// a deadline cancelled, which would hide the overflow's closing.
	s, err := New(Config{DatabaseURL: px.DSN(t, pg.DSN), PoolSize: 2, PoolOverflow: 2, MaxBatch: 1,
		DBTimeout: 20 * time.Second},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	u := refservicestest.Run(t, s)
	refservicestest.WaitStatus(t, u+refservices.PathADRStartup, http.StatusOK, 20*time.Second)
	waitLog(t, logs, 0, "database connection budget", 10*time.Second)
	if l := logs.String(); !strings.Contains(l, "poolSize=2 poolOverflow=2 readiness=1 perReplica=5 maxConnections=") {
		t.Errorf("the budget line lacks size, overflow and max_connections:\n%s", l)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if n := gatewayConns(t, conn); n != 2 {
		t.Errorf("request connections after start = %d, want the pool size 2", n)
	}

	// 300 ms per round trip: 12 orders keep every connection busy.
	px.Latency(t, "downstream", 300)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := refservicestest.Do(http.MethodPost, u+"/orders", fmt.Sprintf(`{"id":"burst-%d"}`, i), 20*time.Second)
			if r.Status != http.StatusCreated && r.Status != http.StatusServiceUnavailable {
				t.Errorf("POST /orders in the burst: %d %q %v", r.Status, r.Body, r.Err)
			}
		}()
	}
	peak := 0
	deadline := time.Now().Add(10 * time.Second)
	for peak < 4 && time.Now().Before(deadline) {
		peak = max(peak, gatewayConns(t, conn))
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	peak = max(peak, gatewayConns(t, conn))
	if peak != 4 {
		t.Errorf("request connections at the burst's peak = %d, want size + overflow = 4", peak)
	}
	// Still slow (removing the toxic would close every connection): the
	// last releases find the size idle and close the overflow.
	deadline = time.Now().Add(10 * time.Second)
	for n := gatewayConns(t, conn); n != 2; n = gatewayConns(t, conn) {
		if time.Now().After(deadline) {
			t.Fatalf("request connections after the burst = %d, want the overflow closed (2 left)", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m := metricsText(t, u); !strings.Contains(m, "orders_db_pool_total_conns 2") || !strings.Contains(m, "orders_db_pool_overflow_conns 2") {
		t.Errorf("metrics lack orders_db_pool_total_conns 2 or orders_db_pool_overflow_conns 2")
	}
	px.Resume(t)
}

// TestReadinessBesideTheRequestPool: with every request connection busy
// behind a slow database, the correct build's /readyz answers on its own
// connection within its timeout, while the naive build's waits behind the
// queued orders for a pool connection (ADR 0077 "Readiness does not
// measure load").
func TestReadinessBesideTheRequestPool(t *testing.T) {
	pg := testutil.Postgres(t)
	for _, tc := range []struct {
		build refservices.Build
		slow  bool // /readyz waits behind the orders
	}{{refservices.BuildCorrect, false}, {refservices.BuildNaive, true}} {
		t.Run(string(tc.build), func(t *testing.T) {
			px := refservicestest.Toxiproxy(t, pg.Addr)
			_, u := startGateway(t, Config{DatabaseURL: px.DSN(t, pg.DSN), Build: tc.build, PoolSize: 1, PoolOverflow: 1,
				MaxBatch: 1, DBTimeout: 10 * time.Second})
			refservicestest.WaitStatus(t, u+refservices.PathADRStartup, http.StatusOK, 20*time.Second)
			px.Latency(t, "downstream", 400)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					refservicestest.Do(http.MethodPost, u+"/orders", fmt.Sprintf(`{"id":"%s-%d"}`, tc.build, i), 20*time.Second)
				}()
			}
			defer wg.Wait()
			time.Sleep(200 * time.Millisecond) // the orders hold both connections
			r := refservicestest.Do(http.MethodGet, u+refservices.PathADRReady, "", 10*time.Second)
			switch {
			case tc.slow && r.Elapsed < 800*time.Millisecond:
				t.Errorf("naive /readyz answered %d in %s with 8 orders queued for 2 connections at 400 ms: want it to wait behind them (above 800 ms)", r.Status, r.Elapsed)
			case !tc.slow && r.Elapsed > 2*time.Second:
				t.Errorf("correct /readyz took %s (status %d) with the request pool busy: want its own connection's answer (a 400 ms round trip, bounded by its 250 ms timeout)", r.Elapsed, r.Status)
			}
			if !tc.slow {
				// Started stays: the gate is not readiness.
				if s := refservicestest.Do(http.MethodGet, u+refservices.PathADRStartup, "", 2*time.Second); s.Status != http.StatusOK {
					t.Errorf("/startupz with the pool busy: %d, want 200 (started is for life)", s.Status)
				}
			}
		})
	}
}

// TestReadinessInterval: once started, the correct build evaluates its
// checks on its own every interval, with nobody asking /readyz: it logs
// "service not ready" with the failing check when the database goes away
// and "service ready again" when it is back, and exports the ADR's
// mowdeck_readiness_check_up and mowdeck_service_started.
func TestReadinessInterval(t *testing.T) {
	pg := testutil.Postgres(t)
	px := refservicestest.Toxiproxy(t, pg.Addr)
	logs := &logBuffer{}
	s, err := New(Config{DatabaseURL: px.DSN(t, pg.DSN), ReadinessInterval: 100 * time.Millisecond},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	u := refservicestest.Run(t, s)
	pos := waitLog(t, logs, 0, "service started", 20*time.Second)
	pos = waitLog(t, logs, pos, "readiness interval", 5*time.Second)
	m := metricsText(t, u)
	for _, want := range []string{"mowdeck_service_started 1", `mowdeck_readiness_check_up{check="database"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q after the start", want)
		}
	}

	px.Pause(t)
	pos = waitLog(t, logs, pos, "service not ready", 10*time.Second)
	if l := logs.String()[pos:]; !strings.Contains(strings.SplitN(l, "\n", 2)[0], ` failing="[database:`) {
		t.Errorf("the not-ready line does not name the failing database check: %q", strings.SplitN(l, "\n", 2)[0])
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(metricsText(t, u), `mowdeck_readiness_check_up{check="database"} 0`) {
		if time.Now().After(deadline) {
			t.Fatal(`mowdeck_readiness_check_up{check="database"} not 0 within 5s of the pause`)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(metricsText(t, u), "mowdeck_service_started 1") {
		t.Error("mowdeck_service_started left 1 while the database is paused: started is for life")
	}
	px.Resume(t)
	waitLog(t, logs, pos, "service ready again", 10*time.Second)
}

// TestReadinessIntervalOff: a negative interval (the flag's 0) evaluates
// nothing on its own: a paused database is not noticed until /readyz is
// asked.
func TestReadinessIntervalOff(t *testing.T) {
	pg := testutil.Postgres(t)
	px := refservicestest.Toxiproxy(t, pg.Addr)
	logs := &logBuffer{}
	s, err := New(Config{DatabaseURL: px.DSN(t, pg.DSN), ReadinessInterval: NoInterval},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	u := refservicestest.Run(t, s)
	pos := waitLog(t, logs, 0, "service started", 20*time.Second)
	px.Pause(t)
	time.Sleep(time.Second)
	if l := logs.String()[pos:]; strings.Contains(l, "service not ready") || strings.Contains(l, "readiness interval") {
		t.Errorf("with the interval off the service evaluated readiness on its own:\n%s", l)
	}
	refservicestest.Do(http.MethodGet, u+refservices.PathADRReady, "", 2*time.Second)
	waitLog(t, logs, pos, "service not ready", 5*time.Second)
	px.Resume(t)
}
