// Package ordergateway is drill's reference order-gateway: POST /orders
// writes an order to PostgreSQL, and the health endpoints follow
// HEALTH-ORD-001 (MC-PS-01, MC-CF-01, MC-FD-01, MC-TR-01, INV-HLT-01..03)
// and ADR 0077 in the correct build, or reproduce INC-3119 in the naive
// build.
//
// # Request path
//
// POST /orders takes a JSON object with an "id" (string or number) and
// INSERTs it into the table orders (created at start under an advisory
// lock, so replicas may start together). In the correct build at most
// MaxInFlight (1024) orders are in flight; beyond that the answer is 503
// ERR_ORDER_OVERLOADED at once, so a stalled database cannot pile up
// goroutines, and each order's database work has a deadline (DBTimeout,
// 1 s): on expiry 503 ERR_ORDER_DB_TIMEOUT. Orders are group-committed:
// PoolSize writers each INSERT whatever is queued (up to MaxBatch, 64) in
// one statement, so 2,800 orders/s across 3 replicas do not hang on the
// round trip through Toxiproxy on a busy machine (--max-batch 1 writes one
// INSERT per request instead, each queueing for a pool connection). The
// naive build defaults to the legacy service's admission: no in-flight
// limit and no deadline of its own, so work queues until its client gives
// up (both are flags, to vary one thing at a time).
//
// # Correct build (HEALTH-ORD-001, ADR 0077)
//
//   - /healthz/startup: 503 until the request pool is open and every
//     readiness check has passed once, then 200 for the process's life.
//   - /healthz/live: answered from an in-process watchdog, no I/O
//     (INV-HLT-01). /health answers the same (a legacy probe path gets the
//     safe meaning).
//   - /healthz/ready: SELECT 1 on a dedicated connection (never one of the
//     request pool), 250 ms timeout, plus work-queue pressure. The tax or
//     any third-party API is never part of it (INV-HLT-03).
//   - ADR 0077 serves the same three as /startupz, /healthz and /readyz.
//     Once started, the checks also run every ReadinessInterval (30 s) on
//     their own, logging "service not ready" with the failing checks and
//     "service ready again", and setting mowdeck_readiness_check_up{check}
//     beside mowdeck_service_started.
//
// # Pool budget (ADR 0077)
//
// The request pool is bounded: PoolSize connections opened at start and
// kept, plus up to PoolOverflow more while every one is busy, closed again
// once PoolSize are idle (the ADR's size + overflow, "5 + 5"). With the
// readiness connection a replica holds at most PoolSize + PoolOverflow + 1
// connections; it logs that budget against PostgreSQL's max_connections
// once started.
//
// # Pressure and ADR 0077 (decision)
//
// MC-PS-01 rejects readiness when the work queue is at >= 90 %; ADR 0077
// says readiness must not measure load, because taking a saturated but
// working service out of routing turns slowness into an outage (with every
// replica saturated, none is left to route to). The default mode
// [PressureStalled] reconciles them: readiness fails on pressure only when
// in-flight orders are at >= 90 % of MaxInFlight AND no order was written
// during the last PressureWindow (1 s), i.e. the queue is full and not
// draining. An overloaded replica that keeps writing orders stays routed
// and sheds its excess itself with fast 503s (ADR 0077 overload drill); a
// replica whose writes are stuck while SELECT 1 still answers (a lock, a
// wedged pool) leaves routing. [PressureStrict] applies the literal 90 %
// rule and [PressureOff] drops pressure, for drills that compare them.
//
// # Naive build (INC-3119)
//
// One deep check serves /health and every /healthz/* path: SELECT 1
// through the REQUEST pool with no timeout of its own, so it queues behind
// orders for a connection and hangs with the database. With the naive
// manifest (liveness and readiness on /health, timeout 1 s, failure 3) a
// 15 s PostgreSQL pause fails liveness three times and the kubelet restarts
// the replica (the writers hold every pool connection, hung on the
// database). Under overload with --max-batch 1 its readiness queues behind
// the unboundedly queued orders for a connection and times out (ADR 0077's
// unroutable phases).
//
// /metrics serves Prometheus text in both builds.
package ordergateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drillhq/drill/internal/refservices"
)

// Name is the reference service's name for `drill serve`.
const Name = "order-gateway"

// schemaLockKey is the advisory lock serialising schema creation.
const schemaLockKey int64 = 0x6f72646572 // "order"

var schemaDDL = []string{
	`CREATE TABLE IF NOT EXISTS orders (
		seq         bigserial PRIMARY KEY,
		order_id    text        NOT NULL,
		payload     text        NOT NULL,
		received_at timestamptz NOT NULL DEFAULT now()
	)`,
}

const insertOrder = `INSERT INTO orders (order_id, payload) VALUES ($1, $2)`

// Problem codes of the order path.
const (
	CodeOverloaded    = "ERR_ORDER_OVERLOADED"
	CodeNotStarted    = "ERR_ORDER_NOT_STARTED"
	CodeInvalid       = "ERR_ORDER_INVALID"
	CodeTooLarge      = "ERR_ORDER_TOO_LARGE"
	CodeDBTimeout     = "ERR_ORDER_DB_TIMEOUT"
	CodeDBUnavailable = "ERR_ORDER_DB_UNAVAILABLE"
	// CodeVendorUnavailable: the naive build's vendor call failed (503).
	CodeVendorUnavailable = "ERR_ORDER_VENDOR_UNAVAILABLE"
)

// retryAfterOverload is the Retry-After of the order path's 503s.
const retryAfterOverload = time.Second

// Service is one order-gateway process. Create it with [New], serve
// [refservices.Base.Handler], call [Service.Start] once, [Service.Close]
// at the end.
type Service struct {
	*refservices.Base
	cfg  Config
	base time.Time

	pool  atomic.Pointer[pgxpool.Pool]
	batch *batcher // nil when MaxBatch is 1
	floor *writeFloor
	// vendor is the payment vendor's client, breaker the correct build's
	// circuit breaker on it (Config.VendorURL).
	vendor  *http.Client
	breaker breaker

	warm     atomic.Bool // pool open and Warmup over
	inflight atomic.Int64
	lastOK   atomic.Int64 // ns since base of the last written order; -1 none

	batches      prometheus.Counter
	batched      prometheus.Counter
	created      prometheus.Counter
	shed         prometheus.Counter
	timeouts     prometheus.Counter
	dbErrors     prometheus.Counter
	invalid      prometheus.Counter
	vendorErrors prometheus.Counter
}

// New validates cfg (after defaults) and returns a Service; it does no I/O.
// Errors name the offending flag.
func New(cfg Config, logger *slog.Logger) (*Service, error) {
	b, err := refservices.NewBase(Name, &cfg, logger)
	if err != nil {
		return nil, err
	}
	s := &Service{Base: b, cfg: cfg, base: time.Now()}
	s.lastOK.Store(-1)
	s.floor = &writeFloor{limit: max(cfg.DBTimeout/10, 0)}
	// Keep-alive connections for every order in flight (the default of 2
	// idle per host would open and close one per order at hundreds a
	// second).
	s.vendor = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
	}}
	if cfg.MaxBatch > 1 {
		queue := cfg.MaxInFlight
		if queue <= 0 {
			queue = 1024
		}
		s.batch = newBatcher(queue, cfg.MaxBatch, s.pool.Load, s.floor, func(n int) {
			s.lastOK.Store(int64(time.Since(s.base)))
			s.batches.Inc()
			s.batched.Add(float64(n))
		})
	}
	var deep http.HandlerFunc
	if s.Naive() {
		deep = s.serveDeepHealth
	}
	s.Init(s.poolGate, deep, func(mux *http.ServeMux) {
		mux.HandleFunc("POST /orders", s.serveOrder)
	}, refservices.Check{Name: "work_queue", Run: s.pressureCheck})
	s.registerMetrics()
	return s, nil
}

func (s *Service) registerMetrics() {
	orders := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orders_total",
		Help: "POST /orders answered, by result.",
	}, []string{"result"})
	s.created = orders.WithLabelValues("created")
	s.shed = orders.WithLabelValues("shed")
	s.timeouts = orders.WithLabelValues("db_timeout")
	s.dbErrors = orders.WithLabelValues("db_error")
	s.invalid = orders.WithLabelValues("invalid")
	s.vendorErrors = orders.WithLabelValues("vendor_error")
	s.batches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orders_batches_total", Help: "INSERT statements of the group-commit writer.",
	})
	s.batched = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orders_batched_total", Help: "Orders written by the group-commit writer (divide by orders_batches_total for the mean batch).",
	})
	s.Registry.MustRegister(orders, s.batches, s.batched,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_inflight", Help: "POST /orders in flight.",
		}, func() float64 { return float64(s.inflight.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_inflight_limit", Help: "In-flight limit of POST /orders.",
		}, func() float64 { return float64(s.cfg.MaxInFlight) }), // -1: unlimited
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_db_pool_acquired_conns", Help: "Request pool connections in use.",
		}, func() float64 {
			if p := s.pool.Load(); p != nil {
				return float64(p.Stat().AcquiredConns())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_db_pool_max_conns", Help: "Request pool size (kept connections).",
		}, func() float64 { return float64(s.cfg.PoolSize) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_db_pool_overflow_conns", Help: "Request pool overflow: connections beyond the size opened while all are busy.",
		}, func() float64 { return float64(s.cfg.PoolOverflow) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_db_pool_total_conns", Help: "Request pool connections open now (at most size + overflow).",
		}, func() float64 {
			if p := s.pool.Load(); p != nil {
				return float64(p.Stat().TotalConns())
			}
			return 0
		}),
	)
}

// Start launches the watchdog and the start-up sequence (open the request
// pool with retries, create the table, wait Warmup, then pass readiness
// once) bound to ctx. It returns at once.
func (s *Service) Start(ctx context.Context) {
	s.Launch(ctx, s.startUp)
	if s.batch != nil {
		s.batch.start(ctx, int(s.cfg.PoolSize))
	}
}

// Close waits for the background work (its ctx must be done) and closes the
// pool and the readiness connection.
func (s *Service) Close() {
	s.Wait()
	if s.batch != nil {
		s.batch.wait()
	}
	if p := s.pool.Swap(nil); p != nil {
		p.Close()
	}
	s.Probe.Close()
}

func (s *Service) startUp(ctx context.Context) {
	opened := refservices.RetryOpen(ctx, s.Logger, func(ctx context.Context) error {
		pool, err := s.openPool(ctx)
		if err != nil {
			return err
		}
		s.pool.Store(pool)
		s.Logger.Info("request pool open", "poolSize", s.cfg.PoolSize, "poolOverflow", s.cfg.PoolOverflow)
		return nil
	})
	if !opened {
		return
	}
	if s.cfg.Warmup > 0 && !refservices.Sleep(ctx, s.cfg.Warmup) {
		return
	}
	if !s.primeCache(ctx) {
		return
	}
	s.warm.Store(true)
	if s.Naive() {
		return
	}
	if !s.Health().WaitStarted(ctx) {
		return
	}
	s.logBudget(ctx)
	if s.cfg.ReadinessInterval > 0 {
		s.Logger.Info("readiness interval", "every", s.cfg.ReadinessInterval)
		s.Health().RunInterval(ctx, s.cfg.ReadinessInterval)
	}
}

// primeCache is the warm-up of Config.WarmupRate: it counts the orders
// written so far and waits count/WarmupRate (at most WarmupMax), as a
// replica priming a cache of them would. It reports false when ctx ended
// first; a failed count is logged and skips the warm-up.
func (s *Service) primeCache(ctx context.Context) bool {
	if s.cfg.WarmupRate <= 0 {
		return true
	}
	pool := s.pool.Load()
	if pool == nil {
		return true
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int64
	if err := pool.QueryRow(qctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
		s.Logger.Warn("cannot count orders to prime the cache; no warm-up", "err", err)
		return ctx.Err() == nil
	}
	d := min(time.Duration(float64(n)/s.cfg.WarmupRate*float64(time.Second)), s.cfg.WarmupMax)
	s.Logger.Info("priming the order cache", "orders", n, "rate", s.cfg.WarmupRate, "takes", d.Round(time.Millisecond))
	return refservices.Sleep(ctx, d)
}

// logBudget logs the replica's connection budget (request pool size +
// overflow, plus the readiness connection) against the database's
// max_connections, and warns when one replica alone exceeds it.
func (s *Service) logBudget(ctx context.Context) {
	per := int(s.cfg.PoolSize) + int(s.cfg.PoolOverflow) + 1
	attrs := []any{"poolSize", s.cfg.PoolSize, "poolOverflow", s.cfg.PoolOverflow, "readiness", 1, "perReplica", per}
	pool := s.pool.Load()
	if pool == nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var maxConns int
	if err := pool.QueryRow(qctx, "SELECT current_setting('max_connections')::int").Scan(&maxConns); err != nil {
		s.Logger.Info("database connection budget", append(attrs, "maxConnections", "unknown: "+err.Error())...)
		return
	}
	attrs = append(attrs, "maxConnections", maxConns)
	if per > maxConns {
		s.Logger.Warn("database connection budget exceeds max_connections", attrs...)
		return
	}
	s.Logger.Info("database connection budget", attrs...)
}

func (s *Service) openPool(ctx context.Context) (*pgxpool.Pool, error) {
	pools, err := refservices.OpenPools(ctx, s.cfg.DatabaseURL, schemaLockKey, schemaDDL, refservices.PoolOptions{
		MaxConns: s.cfg.PoolSize, Overflow: s.cfg.PoolOverflow, WarmConns: s.cfg.PoolSize, ConnectTimeout: 2 * time.Second, Name: Name,
	})
	if err != nil {
		return nil, err
	}
	return pools[0], nil
}

// poolGate is the start-up precondition: the request pool is open. The
// warm-up is part of it.
func (s *Service) poolGate() error {
	if s.pool.Load() == nil {
		return errors.New("request pool not open yet")
	}
	if !s.warm.Load() {
		return errors.New("warming up")
	}
	return nil
}

// pressureCheck is the work-queue part of readiness (MC-PS-01, ADR 0077;
// see the package doc).
func (s *Service) pressureCheck(context.Context) error {
	if s.cfg.Pressure == PressureOff || s.cfg.MaxInFlight <= 0 {
		return nil
	}
	n := s.inflight.Load()
	limit := s.cfg.MaxInFlight
	if float64(n) < s.cfg.PressureThreshold*float64(limit) {
		return nil
	}
	if s.cfg.Pressure == PressureStrict {
		return fmt.Errorf("work queue at %d/%d (>= %.0f %%)", n, limit, s.cfg.PressureThreshold*100)
	}
	last := s.lastOK.Load()
	if last >= 0 {
		since := time.Since(s.base) - time.Duration(last)
		if since < s.cfg.PressureWindow {
			return nil // saturated but draining: stays routed (ADR 0077)
		}
		return fmt.Errorf("work queue at %d/%d (>= %.0f %%) and no order written for %s",
			n, limit, s.cfg.PressureThreshold*100, since.Round(time.Millisecond))
	}
	return fmt.Errorf("work queue at %d/%d (>= %.0f %%) and no order written yet",
		n, limit, s.cfg.PressureThreshold*100)
}

// serveDeepHealth is the naive build's one deep check (INC-3119): SELECT 1
// through the request pool with no timeout of its own; it returns only when
// the pool hands out a connection and the database answers, or when the
// prober gives up and closes the connection.
func (s *Service) serveDeepHealth(w http.ResponseWriter, r *http.Request) {
	pool := s.pool.Load()
	if pool == nil {
		refservices.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down", "error": "request pool not open yet"})
		return
	}
	if !s.warm.Load() {
		// One endpoint for everything: a replica still warming up looks
		// down, to liveness as well (the naive build has no startup probe).
		refservices.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down", "error": "warming up"})
		return
	}
	var one int
	if err := pool.QueryRow(r.Context(), "SELECT 1").Scan(&one); err != nil {
		refservices.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down", "error": err.Error()})
		return
	}
	if err := s.getVendor(r.Context()); s.cfg.VendorURL != "" && err != nil {
		refservices.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down", "error": err.Error()})
		return
	}
	refservices.WriteJSON(w, http.StatusOK, map[string]string{"status": "up"})
}

type orderResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (s *Service) serveOrder(w http.ResponseWriter, r *http.Request) {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if s.cfg.MaxInFlight > 0 && n > int64(s.cfg.MaxInFlight) {
		s.shed.Inc()
		refservices.WriteProblem(w, refservices.Problem{
			Status: http.StatusServiceUnavailable, Title: "Order gateway overloaded", Code: CodeOverloaded,
			Detail: fmt.Sprintf("in-flight limit of %d orders reached", s.cfg.MaxInFlight),
		}, retryAfterOverload)
		return
	}
	pool := s.pool.Load()
	if pool == nil {
		refservices.WriteProblem(w, refservices.Problem{
			Status: http.StatusServiceUnavailable, Title: "Order gateway starting", Code: CodeNotStarted,
			Detail: "the database pool is not open yet",
		}, retryAfterOverload)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBodyBytes+1))
	if err != nil {
		s.invalid.Inc()
		refservices.WriteProblem(w, refservices.Problem{Status: http.StatusBadRequest, Title: "Unreadable order", Code: CodeInvalid, Detail: err.Error()}, 0)
		return
	}
	if int64(len(body)) > s.cfg.MaxBodyBytes {
		s.invalid.Inc()
		refservices.WriteProblem(w, refservices.Problem{
			Status: http.StatusRequestEntityTooLarge, Title: "Order too large", Code: CodeTooLarge,
			Detail: fmt.Sprintf("order body exceeds %d bytes", s.cfg.MaxBodyBytes),
		}, 0)
		return
	}
	id, err := orderID(body)
	if err != nil {
		s.invalid.Inc()
		refservices.WriteProblem(w, refservices.Problem{Status: http.StatusBadRequest, Title: "Invalid order", Code: CodeInvalid, Detail: err.Error()}, 0)
		return
	}

	pending, err := s.callVendor(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away; nobody reads an answer
		}
		s.vendorErrors.Inc()
		refservices.WriteProblem(w, refservices.Problem{
			Status: http.StatusServiceUnavailable, Title: "Payment vendor unavailable", Code: CodeVendorUnavailable, Detail: err.Error(),
		}, retryAfterOverload)
		return
	}

	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if s.cfg.DBTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.cfg.DBTimeout)
	}
	if s.batch != nil {
		err = s.batch.submit(&order{ctx: ctx, id: id, payload: string(body), done: make(chan error, 1)})
	} else {
		err = s.insert(ctx, pool, id, string(body))
		if err == nil {
			s.lastOK.Store(int64(time.Since(s.base)))
		}
	}
	// The batch may hit the deadline a moment before ctx notices it.
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)
	cancel()
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away; nobody reads an answer
		}
		if timedOut {
			s.timeouts.Inc()
			refservices.WriteProblem(w, refservices.Problem{
				Status: http.StatusServiceUnavailable, Title: "Database too slow", Code: CodeDBTimeout,
				Detail: fmt.Sprintf("the order was not written within %s", s.cfg.DBTimeout),
			}, retryAfterOverload)
			return
		}
		s.dbErrors.Inc()
		s.Logger.Debug("write order", "err", err)
		refservices.WriteProblem(w, refservices.Problem{
			Status: http.StatusServiceUnavailable, Title: "Database unavailable", Code: CodeDBUnavailable, Detail: err.Error(),
		}, retryAfterOverload)
		return
	}
	s.created.Inc()
	status := "accepted"
	if pending {
		status = "payment_pending" // the vendor was slow or its breaker open: captured later
	}
	refservices.WriteJSON(w, http.StatusCreated, orderResponse{ID: id, Status: status})
}

// insert writes one order on a pooled connection within ctx. An order
// whose deadline leaves less than the write floor once it holds a
// connection is not written ([errTooLate]), so its deadline cannot cut
// the statement off and close the connection ([writeFloor]); nor can its
// client going away ([refservices.StatementContext]).
func (s *Service) insert(ctx context.Context, pool *pgxpool.Pool, id, payload string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if s.floor.tooLate(ctx) {
		return errTooLate
	}
	sctx, cancel := refservices.StatementContext(ctx)
	defer cancel()
	start := time.Now()
	if _, err := conn.Exec(sctx, insertOrder, id, payload); err != nil {
		return err
	}
	s.floor.observe(time.Since(start))
	return nil
}

// orderID extracts the order's "id" (a non-empty string or a number).
func orderID(body []byte) (string, error) {
	var o struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return "", fmt.Errorf("decode order: %w", err)
	}
	raw := o.ID
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("order: id is required")
	}
	switch c := raw[0]; {
	case c == '"':
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return "", fmt.Errorf("decode order id: %w", err)
		}
		if id == "" {
			return "", errors.New("order: id must not be empty")
		}
		return id, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return string(raw), nil
	}
	return "", errors.New("order: id must be a string or a number")
}
