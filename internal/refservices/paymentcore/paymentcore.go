// Package paymentcore is drill's reference payment-core: three workload
// lanes behind bulkheads as BULKHEAD-PAY-001 specifies (MC-FM-01, MC-PO-01,
// MC-ST-01, MC-RT-01, ADV-IR-01, ADV-FD-01, ADV-UC-01, INV-BH-01..04) in the
// correct build, or one shared pool as in INC-4491 in the naive build.
//
// # Endpoints
//
//   - POST /auth  {"card": "tok_1", "amountCents": 1999}: lane card_auth;
//     INSERTs the authorisation on the lane's pool; 200
//     {"authorizationId": N, "status": "approved"}. Without "card" the
//     request's "id" names the card.
//   - POST /fraud {"card": "tok_1", "amountCents": 1999}: lane fraud_eval;
//     counts the card's authorisations of the last minute on the lane's
//     pool; 200 {"score": 0..100, "decision": "allow"|"review"}. A
//     saturated lane defers the scoring (correct build, below): 202.
//   - POST /tax   {"jurisdiction": "US-CA", "amountCents": 1999}: lane
//     tax_calc; asks the tax API (TaxAPIURL, 10 s timeout) and answers 200
//     with {"rate", "taxCents", "source": "tax-api"}; when the call fails
//     or times out it answers 200 from the cached table (source
//     "cached-rate-table", "fallbackReason"). The quote is then recorded
//     on the lane's pool. Jurisdictions outside the table get 422.
//
// Amounts may also be spelled "amount_cents"; other members (id,
// currency, ...) are ignored. Bad bodies get 400 ERR_PAYMENT_INVALID_REQUEST.
//   - /healthz/startup, /healthz/live, /healthz/ready as in order-gateway:
//     readiness is SELECT 1 on a dedicated connection and never includes
//     the tax API (HEALTH-ORD-001 INV-HLT-03). No load in readiness: the
//     bulkheads shed excess themselves (ADR 0077).
//   - /metrics: Prometheus text, per lane bulkhead_active_workers,
//     bulkhead_queue_depth, bulkhead_rejections_total,
//     bulkhead_admitted_total, bulkhead_max_workers,
//     bulkhead_queue_capacity, bulkhead_state{state} (1 for the current
//     state), bulkhead_db_pool_acquired_conns, bulkhead_db_pool_max_conns,
//     bulkhead_blocked_workers (workers waiting on the tax API now: only
//     the tax lane's in the correct build; the shared bulkhead's under
//     every lane's label in the naive build, MC-FM-01.4);
//     tax_fallback_total{reason}, tax_cache_drift_total,
//     retry_storm_blocked_total; fraud_async_queue_depth,
//     fraud_async_enqueued_total, fraud_async_evaluated_total,
//     fraud_async_failed_total, fraud_async_rejected_total and
//     fraud_async_wait_seconds (the asynchronous fraud queue; 0 in the
//     naive build, which has none).
//
// # Correct build
//
// Each lane has its own [Bulkhead] (workers, FIFO queue) and its own pgx
// pool: card_auth 75/10/40, fraud_eval 30/5/15, tax_calc 15/0/5 (MC-PO-01,
// INV-BH-01, INV-BH-03). A full lane rejects at once, with Retry-After: 5
// and an RFC 9457 problem body (INV-BH-04): card_auth 429
// ERR_AUTH_BULKHEAD_SATURATED; tax_calc 503 ERR_TAX_BULKHEAD_SATURATED
// whose body carries the cached-table quote as "fallback" (MC-FM-01). A
// full fraud_eval lane bypasses synchronous scoring to its asynchronous
// evaluation queue (MC-PO-01): the request is queued (FraudAsyncQueue,
// 10,000) and answered at once with 202 and a problem body, code
// FRAUD_SCORING_DEFERRED, decision "pending"; FraudAsyncWorkers (2)
// evaluators score the queue in the background on the lane's own pool.
// Only when that queue is full too does the lane answer 503
// ERR_FRAUD_BULKHEAD_SATURATED. The tax call
// holds no database connection while it waits (ADV-FD-01). A request with
// X-Retry-Attempt above MaxRetries (3) gets 429 ERR_RETRY_STORM_BLOCKED
// (ADV-IR-01). The cached table is validated at start (never a zero rate)
// and certified against the authority's table by a test (ADV-UC-01); live
// tax-API rates that drift beyond 0.5 % from it are counted.
//
// # Naive build (INC-4491)
//
// One bulkhead of 120 workers (queue 1000, 30 s wait) and one pool of 60
// connections serve every lane; the tax lane acquires a connection and
// opens a transaction BEFORE calling the tax API and holds it while it
// waits. An 8,000 ms tax brownout at 150 tax/s soon holds every worker
// and connection, and card-auth latency goes far past 120 ms. A full queue
// answers a bare 503 without Retry-After, in every lane: there is no
// asynchronous fraud queue. Where a tax call cannot be served (a full
// queue, an exhausted pool, a failed tax API) its fallback quote is zero
// tax, source "default", checked against nothing (ADV-UC-01.2's
// anti-pattern). X-Retry-Attempt is not counted. Per-lane metrics are
// still reported (the lane's share of the shared pool).
package paymentcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drillhq/drill/internal/refservices"
)

// Name is the reference service's name for `drill serve`.
const Name = "payment-core"

// Lanes, as indices.
const (
	LaneAuth = iota
	LaneFraud
	LaneTax
	numLanes
)

// LaneNames are the lanes' metric labels, by index.
var LaneNames = [numLanes]string{"card_auth", "fraud_eval", "tax_calc"}

// Problem codes.
const (
	CodeAuthSaturated  = "ERR_AUTH_BULKHEAD_SATURATED"
	CodeFraudSaturated = "ERR_FRAUD_BULKHEAD_SATURATED"
	CodeTaxSaturated   = "ERR_TAX_BULKHEAD_SATURATED"
	CodeRetryStorm     = "ERR_RETRY_STORM_BLOCKED"
	CodeInvalid        = "ERR_PAYMENT_INVALID_REQUEST"
	CodeUnknownJur     = "ERR_TAX_UNKNOWN_JURISDICTION"
	CodeNotStarted     = "ERR_PAYMENT_NOT_STARTED"
	CodeDBTimeout      = "ERR_PAYMENT_DB_TIMEOUT"
	CodeDBUnavailable  = "ERR_PAYMENT_DB_UNAVAILABLE"
)

// Tax quote sources.
const (
	SourceTaxAPI = "tax-api"
	SourceCache  = "cached-rate-table"
	// SourceDefault is the naive build's fallback: zero tax, verified
	// against nothing (the anti-pattern of BULKHEAD-PAY-001 ADV-UC-01.2).
	SourceDefault = "default"
)

// RetryAttemptHeader carries the caller's retry number (0 or absent for a
// first attempt), read for ADV-IR-01.
const RetryAttemptHeader = "X-Retry-Attempt"

const schemaLockKey int64 = 0x7061796d656e74 // "payment"

var schemaDDL = []string{
	`CREATE TABLE IF NOT EXISTS pay_auths (
		id           bigserial PRIMARY KEY,
		card         text        NOT NULL,
		amount_cents bigint      NOT NULL,
		created_at   timestamptz NOT NULL DEFAULT now()
	)`,
	`CREATE INDEX IF NOT EXISTS pay_auths_card_created ON pay_auths (card, created_at)`,
	`CREATE TABLE IF NOT EXISTS pay_tax_quotes (
		id           bigserial PRIMARY KEY,
		jurisdiction text             NOT NULL,
		amount_cents bigint           NOT NULL,
		rate         double precision NOT NULL,
		source       text             NOT NULL,
		created_at   timestamptz      NOT NULL DEFAULT now()
	)`,
}

const (
	insertAuth  = `INSERT INTO pay_auths (card, amount_cents) VALUES ($1, $2) RETURNING id`
	countFraud  = `SELECT count(*) FROM pay_auths WHERE card = $1 AND created_at > now() - interval '1 minute'`
	insertQuote = `INSERT INTO pay_tax_quotes (jurisdiction, amount_cents, rate, source) VALUES ($1, $2, $3, $4) RETURNING id`
	updateQuote = `UPDATE pay_tax_quotes SET rate = $2, source = $3 WHERE id = $1`
)

const maxBody = 16 << 10

// warmConns is how many connections of each pool are opened at start.
const warmConns = 8

type poolSet struct {
	byLane [numLanes]*pgxpool.Pool
	all    []*pgxpool.Pool
}

// Service is one payment-core process. Create it with [New], serve
// [Service.Handler], call [Service.Start] once, [Service.Close] at the end.
type Service struct {
	*refservices.Base
	cfg   Config
	rates RateTable
	tax   *TaxAPI // nil: no tax API configured

	bh         [numLanes]*Bulkhead // naive: the same shared bulkhead thrice
	distinct   []*Bulkhead
	pools      atomic.Pointer[poolSet]
	auths      *authBatcher // nil: one INSERT per authorization (AuthBatch 1)
	fraudAsync *fraudQueue  // nil: no asynchronous fraud queue (naive, or FraudAsyncQueue -1)

	fallbacks     *prometheus.CounterVec
	drift         prometheus.Counter
	retryBlocked  prometheus.Counter
	auditFailures prometheus.Counter

	authStatements, authRows prometheus.Counter // group-commit writers' work
}

// New validates cfg (after defaults) and the cached rate table and returns
// a Service; it does no I/O. Errors name the offending flag, or wrap
// [ErrUntestedCompensation] for a bad table.
func New(cfg Config, logger *slog.Logger) (*Service, error) {
	b, err := refservices.NewBase(Name, &cfg, logger)
	if err != nil {
		return nil, err
	}
	rates, err := CachedRates()
	if err != nil {
		return nil, fmt.Errorf("configure %s: %w", Name, err)
	}
	logger = b.Logger
	s := &Service{Base: b, cfg: cfg, rates: rates}
	if cfg.TaxAPIURL != "" {
		maxConns := cfg.Tax.Workers
		if cfg.Build == refservices.BuildNaive {
			maxConns = cfg.Shared.Workers
		}
		s.tax = NewTaxAPI(cfg.TaxAPIURL, cfg.TaxTimeout, maxConns)
	}
	onTransition := func(name string, from, to State) {
		logger.Info("bulkhead state", "bulkhead", name, "from", from.String(), "to", to.String())
	}
	if cfg.Build == refservices.BuildNaive {
		shared, err := NewBulkhead(BulkheadConfig{
			Name: "shared", Workers: cfg.Shared.Workers, Queue: cfg.Shared.Queue, QueueTimeout: cfg.Shared.QueueTimeout,
			RecoveryHold: cfg.RecoveryHold, Tags: numLanes, OnTransition: onTransition,
		})
		if err != nil {
			return nil, fmt.Errorf("configure %s: %w", Name, err)
		}
		s.bh = [numLanes]*Bulkhead{shared, shared, shared}
		s.distinct = []*Bulkhead{shared}
	} else {
		for i, lc := range []LaneConfig{cfg.Auth, cfg.Fraud, cfg.Tax} {
			b, err := NewBulkhead(BulkheadConfig{
				Name: LaneNames[i], Workers: lc.Workers, Queue: lc.Queue, QueueTimeout: lc.QueueTimeout,
				RecoveryHold: cfg.RecoveryHold, Tags: numLanes, OnTransition: onTransition,
			})
			if err != nil {
				return nil, fmt.Errorf("configure %s: %w", Name, err)
			}
			s.bh[i] = b
			s.distinct = append(s.distinct, b)
		}
	}
	if cfg.AuthBatch > 1 {
		s.auths = newAuthBatcher(cfg.authLane().Workers, cfg.AuthBatch, func() *pgxpool.Pool {
			if ps := s.pools.Load(); ps != nil {
				return ps.byLane[LaneAuth]
			}
			return nil
		}, func(rows int) {
			s.authStatements.Inc()
			s.authRows.Add(float64(rows))
		})
	}
	s.Init(s.poolGate, nil, func(mux *http.ServeMux) {
		mux.HandleFunc("POST /auth", s.serveAuth)
		mux.HandleFunc("POST /fraud", s.serveFraud)
		mux.HandleFunc("POST /tax", s.serveTax)
	})
	s.registerMetrics()
	// The queue's metrics exist in both builds (zero in the naive one).
	capacity := max(cfg.FraudAsyncQueue, 0)
	if s.Naive() {
		capacity = 0
	}
	fq := newFraudQueue(capacity, cfg.FraudAsyncWorkers, cfg.DBTimeout, s.Registry)
	if capacity > 0 {
		s.fraudAsync = fq
	}
	return s, nil
}

// Bulkhead returns lane's bulkhead (the shared one in the naive build).
func (s *Service) Bulkhead(lane int) *Bulkhead { return s.bh[lane] }

// Start launches the watchdog, the bulkhead state ticker and the start-up
// sequence (open the pools with retries, create the tables, pass readiness
// once) bound to ctx. It returns at once.
func (s *Service) Start(ctx context.Context) {
	if s.tax == nil {
		s.Logger.Warn("no tax API configured; the tax lane answers from the cached rate table only")
	}
	if s.auths != nil {
		s.auths.start(ctx, s.cfg.AuthBatchWriters)
	}
	s.Launch(ctx, s.startUp)
	if s.fraudAsync != nil {
		s.fraudAsync.run(ctx, s.Base, func() *pgxpool.Pool {
			if ps := s.pools.Load(); ps != nil {
				return ps.byLane[LaneFraud]
			}
			return nil
		})
	}
	s.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				for _, b := range s.distinct {
					b.Tick(now)
				}
			}
		}
	})
}

// Close waits for the background work (its ctx must be done) and closes the
// pools, the readiness connection and idle tax API connections.
func (s *Service) Close() {
	s.Wait()
	if s.auths != nil {
		s.auths.wait()
	}
	if ps := s.pools.Swap(nil); ps != nil {
		for _, p := range ps.all {
			p.Close()
		}
	}
	s.Probe.Close()
	if s.tax != nil {
		s.tax.Close()
	}
}

func (s *Service) startUp(ctx context.Context) {
	opened := refservices.RetryOpen(ctx, s.Logger, func(ctx context.Context) error {
		ps, err := s.openPools(ctx)
		if err != nil {
			return err
		}
		s.pools.Store(ps)
		s.Logger.Info("database pools open", "pools", len(ps.all))
		return nil
	})
	if opened {
		s.Health().WaitStarted(ctx)
	}
}

func (s *Service) openPools(ctx context.Context) (*poolSet, error) {
	names, lanes := LaneNames[:], []LaneConfig{s.cfg.Auth, s.cfg.Fraud, s.cfg.Tax}
	if s.Naive() {
		names, lanes = []string{"shared"}, []LaneConfig{s.cfg.Shared}
	}
	var opts []refservices.PoolOptions
	for i, lc := range lanes {
		opts = append(opts, refservices.PoolOptions{
			MaxConns: lc.Pool, WarmConns: min(lc.Pool, warmConns), ConnectTimeout: 2 * time.Second, Name: Name + "/" + names[i],
		})
	}
	pools, err := refservices.OpenPools(ctx, s.cfg.DatabaseURL, schemaLockKey, schemaDDL, opts...)
	if err != nil {
		return nil, err
	}
	ps := &poolSet{all: pools}
	if s.Naive() {
		ps.byLane = [numLanes]*pgxpool.Pool{pools[0], pools[0], pools[0]}
	} else {
		copy(ps.byLane[:], pools)
	}
	return ps, nil
}

func (s *Service) poolGate() error {
	if s.pools.Load() == nil {
		return errors.New("database pools not open yet")
	}
	return nil
}

// --- requests ---------------------------------------------------------------

// payRequest is the body of POST /auth, /fraud and /tax. Amounts are
// accepted as "amountCents" or "amount_cents"; the card defaults to the
// request's "id" when absent, so generic load bodies work.
type payRequest struct {
	ID           json.RawMessage `json:"id"`
	Card         string          `json:"card"`
	AmountCents  *int64          `json:"amountCents"`
	AmountSnake  *int64          `json:"amount_cents"`
	Jurisdiction string          `json:"jurisdiction"`
}

// amount is the request's amount in cents.
func (r payRequest) amount() int64 {
	if r.AmountCents != nil {
		return *r.AmountCents
	}
	return *r.AmountSnake
}

// card is the card token, else "id:<id>".
func (r payRequest) card() string {
	if r.Card != "" {
		return r.Card
	}
	return "id:" + strings.Trim(string(r.ID), `"`)
}

// TaxQuote is the answer of POST /tax (and the "fallback" member of a shed
// tax request's problem body).
type TaxQuote struct {
	Jurisdiction string  `json:"jurisdiction"`
	AmountCents  int64   `json:"amountCents"`
	Rate         float64 `json:"rate"`
	TaxCents     int64   `json:"taxCents"`
	// Source is "tax-api", "cached-rate-table", or in the naive build's
	// fallback "default" (zero tax).
	Source string `json:"source"`
	// TableVersion is the cached table's version (cached quotes only).
	TableVersion string `json:"tableVersion,omitempty"`
	// FallbackReason says why the cache answered: shed, timeout, error,
	// invalid, unconfigured.
	FallbackReason string `json:"fallbackReason,omitempty"`
}

func (s *Service) decode(w http.ResponseWriter, r *http.Request, needCard bool) (payRequest, bool) {
	var req payRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = fmt.Errorf("body exceeds %d bytes", maxBody)
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	switch {
	case err != nil:
	case needCard && req.Card == "" && len(req.ID) == 0:
		err = errors.New("card (or id) is required")
	case !needCard && req.Jurisdiction == "":
		err = errors.New("jurisdiction is required")
	case req.AmountCents == nil && req.AmountSnake == nil:
		err = errors.New("amountCents is required")
	case req.amount() < 0:
		err = errors.New("amountCents must be >= 0")
	}
	if err != nil {
		refservices.WriteProblem(w, refservices.Problem{Status: http.StatusBadRequest, Title: "Invalid request", Code: CodeInvalid, Detail: err.Error()}, 0)
		return req, false
	}
	return req, true
}

// retryStorm enforces ADV-IR-01 in the correct build; it reports whether
// the request was blocked (and answered).
func (s *Service) retryStorm(w http.ResponseWriter, r *http.Request) bool {
	if s.Naive() {
		return false
	}
	v := r.Header.Get(RetryAttemptHeader)
	if v == "" {
		return false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= s.cfg.MaxRetries {
		return false
	}
	s.retryBlocked.Inc()
	refservices.WriteProblem(w, refservices.Problem{
		Status: http.StatusTooManyRequests, Title: "Retry limit exceeded", Code: CodeRetryStorm,
		Detail: fmt.Sprintf("retry attempt %d exceeds the limit of %d; back off", n, s.cfg.MaxRetries),
	}, s.cfg.RetryAfter)
	return true
}

// rejectSaturated answers a request its lane could not admit.
func (s *Service) rejectSaturated(w http.ResponseWriter, lane int, extra map[string]any) {
	if s.Naive() {
		s.naiveBusy(w, extra)
		return
	}
	p := refservices.Problem{
		Type:   "urn:drill:problem:bulkhead-saturated",
		Status: http.StatusServiceUnavailable,
		Extra:  extra,
	}
	switch lane {
	case LaneAuth:
		p.Status, p.Title, p.Code = http.StatusTooManyRequests, "Card authorisation bulkhead saturated", CodeAuthSaturated
	case LaneFraud:
		p.Title, p.Code = "Fraud evaluation bulkhead saturated", CodeFraudSaturated
	case LaneTax:
		p.Title, p.Code = "Tax calculation bulkhead saturated", CodeTaxSaturated
	}
	if p.Extra == nil {
		p.Extra = map[string]any{}
	}
	p.Extra["lane"] = LaneNames[lane]
	p.Detail = fmt.Sprintf("every %s worker is busy; retry after %s", LaneNames[lane], s.cfg.RetryAfter)
	refservices.WriteProblem(w, p, s.cfg.RetryAfter)
}

// naiveBusy is the naive build's answer when its shared queue is full: a
// bare 503 without Retry-After or problem code, in plain text, or in JSON
// with extra's members when there are any (a tax call's zero-tax
// fallback, ADV-UC-01.2's anti-pattern).
func (s *Service) naiveBusy(w http.ResponseWriter, extra map[string]any) {
	if extra != nil {
		body := map[string]any{"error": "server busy"}
		maps.Copy(body, extra)
		refservices.WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, "server busy\n")
}

// dbFailure answers a failed database step with [Service.dbProblem].
func (s *Service) dbFailure(w http.ResponseWriter, r *http.Request, lane int, err error, timedOut bool) {
	if r.Context().Err() != nil {
		return // client gone
	}
	refservices.WriteProblem(w, s.dbProblem(lane, err, timedOut), s.cfg.RetryAfter)
}

// dbProblem is the 503 problem of a failed database step of lane:
// ERR_DB_TIMEOUT when it timed out, else ERR_DB_UNAVAILABLE.
func (s *Service) dbProblem(lane int, err error, timedOut bool) refservices.Problem {
	p := refservices.Problem{Status: http.StatusServiceUnavailable, Title: "Database unavailable", Code: CodeDBUnavailable, Detail: err.Error(),
		Extra: map[string]any{"lane": LaneNames[lane]}}
	if timedOut {
		p.Title, p.Code = "Database too slow", CodeDBTimeout
		p.Detail = fmt.Sprintf("database work did not finish within %s", s.cfg.DBTimeout)
	}
	return p
}

func (s *Service) notStarted(w http.ResponseWriter) {
	refservices.WriteProblem(w, refservices.Problem{Status: http.StatusServiceUnavailable, Title: "Payment core starting", Code: CodeNotStarted,
		Detail: "the database pools are not open yet"}, s.cfg.RetryAfter)
}

// enter takes a worker of lane's bulkhead and the database pools. When it
// reports false the request was answered (lane saturated, or pools not open
// yet) or its client is gone; otherwise the caller must call release when
// done. onReject, when not nil, answers a request the saturated lane could
// not admit instead of [Service.rejectSaturated].
func (s *Service) enter(w http.ResponseWriter, r *http.Request, lane int, onReject func()) (ps *poolSet, release func(), ok bool) {
	permit, err := s.bh[lane].Acquire(r.Context(), lane)
	if err != nil {
		if r.Context().Err() == nil {
			if onReject != nil {
				onReject()
			} else {
				s.rejectSaturated(w, lane, nil)
			}
		}
		return nil, nil, false
	}
	if ps = s.pools.Load(); ps == nil {
		s.notStarted(w)
		permit.Release()
		return nil, nil, false
	}
	return ps, permit.Release, true
}

// queryOne runs query with args on lane's pool within DBTimeout and scans
// its one row into dest. When it reports false the failure was answered.
// The statement runs to its end (or DBTimeout) even when the client leaves
// ([refservices.StatementContext]): cut off mid-statement, pgx would close the
// pooled connection and the pool open a new one.
func (s *Service) queryOne(w http.ResponseWriter, r *http.Request, ps *poolSet, lane int, dest any, query string, args ...any) bool {
	ctx, cancel := refservices.StatementContext(r.Context())
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancelTimeout()
	if err := ps.byLane[lane].QueryRow(ctx, query, args...).Scan(dest); err != nil {
		s.dbFailure(w, r, lane, err, errors.Is(ctx.Err(), context.DeadlineExceeded))
		return false
	}
	return true
}

func (s *Service) serveAuth(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r, true)
	if !ok || s.retryStorm(w, r) {
		return
	}
	ps, release, ok := s.enter(w, r, LaneAuth, nil)
	if !ok {
		return
	}
	defer release()
	var id int64
	if s.auths != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DBTimeout)
		defer cancel()
		var err error
		if id, err = s.auths.submit(ctx, req.card(), req.amount()); err != nil {
			s.dbFailure(w, r, LaneAuth, err, errors.Is(ctx.Err(), context.DeadlineExceeded))
			return
		}
	} else if !s.queryOne(w, r, ps, LaneAuth, &id, insertAuth, req.card(), req.amount()) {
		return
	}
	refservices.WriteJSON(w, http.StatusOK, map[string]any{"authorizationId": id, "status": "approved"})
}

func (s *Service) serveFraud(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r, true)
	if !ok || s.retryStorm(w, r) {
		return
	}
	ps, release, ok := s.enter(w, r, LaneFraud, func() {
		if !s.deferFraud(w, req) {
			s.rejectSaturated(w, LaneFraud, nil)
		}
	})
	if !ok {
		return
	}
	defer release()
	var recent int64
	if !s.queryOne(w, r, ps, LaneFraud, &recent, countFraud, req.card()) {
		return
	}
	score := min(100, recent*10)
	decision := "allow"
	if score >= 50 {
		decision = "review"
	}
	refservices.WriteJSON(w, http.StatusOK, map[string]any{"score": score, "decision": decision, "recentAuthorizations": recent})
}

// zeroQuote is the naive build's fallback quote: zero tax from no table
// at all (ADV-UC-01.2 forbids it; a drill's check on the tax field
// catches it).
func zeroQuote(req payRequest, reason string) TaxQuote {
	return TaxQuote{Jurisdiction: req.Jurisdiction, AmountCents: req.amount(), Source: SourceDefault, FallbackReason: reason}
}

func (s *Service) cachedQuote(req payRequest, reason string) TaxQuote {
	rate, _ := s.rates.Rate(req.Jurisdiction)
	return TaxQuote{
		Jurisdiction: req.Jurisdiction, AmountCents: req.amount(), Rate: rate, TaxCents: TaxCents(req.amount(), rate),
		Source: SourceCache, TableVersion: s.rates.Version, FallbackReason: reason,
	}
}

func (s *Service) serveTax(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r, false)
	if !ok || s.retryStorm(w, r) {
		return
	}
	if _, known := s.rates.Rate(req.Jurisdiction); !known {
		refservices.WriteProblem(w, refservices.Problem{Status: http.StatusUnprocessableEntity, Title: "Unknown jurisdiction", Code: CodeUnknownJur,
			Detail: fmt.Sprintf("no tax rate for jurisdiction %q", req.Jurisdiction)}, 0)
		return
	}
	ps, release, ok := s.enter(w, r, LaneTax, func() {
		s.fallbacks.WithLabelValues("shed").Inc()
		fallback := s.cachedQuote(req, "shed")
		if s.Naive() {
			fallback = zeroQuote(req, "shed")
		}
		s.rejectSaturated(w, LaneTax, map[string]any{"fallback": fallback})
	})
	if !ok {
		return
	}
	defer release()
	if s.Naive() {
		s.naiveTax(w, r, ps.byLane[LaneTax], req)
		return
	}
	q := s.quote(r.Context(), req)
	if r.Context().Err() != nil {
		return
	}
	// Record the quote on the tax lane's own pool, after the API call: no
	// connection is held while the tax API is slow (ADV-FD-01). The
	// statement is not cut off when the client leaves (see queryOne).
	sctx, scancel := refservices.StatementContext(r.Context())
	defer scancel()
	ctx, cancel := context.WithTimeout(sctx, s.cfg.DBTimeout)
	defer cancel()
	var id int64
	if err := ps.byLane[LaneTax].QueryRow(ctx, insertQuote, q.Jurisdiction, q.AmountCents, q.Rate, q.Source).Scan(&id); err != nil {
		s.auditFailures.Inc()
		s.Logger.Debug("record tax quote", "err", err)
	}
	refservices.WriteJSON(w, http.StatusOK, q)
}

// quote asks the tax API and falls back to the cached table.
func (s *Service) quote(ctx context.Context, req payRequest) TaxQuote {
	cached, _ := s.rates.Rate(req.Jurisdiction)
	if s.tax == nil {
		s.fallbacks.WithLabelValues("unconfigured").Inc()
		return s.cachedQuote(req, "unconfigured")
	}
	// The caller's worker waits on the tax API: the tax lane's in the
	// correct build, the one shared bulkhead's in the naive build, where
	// every lane's label reports it (MC-FM-01.4).
	unblock := s.bh[LaneTax].Blocked()
	rate, err := s.tax.Rate(ctx, req.Jurisdiction, req.amount())
	unblock()
	if err != nil {
		reason := "error"
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			reason = "timeout"
		case errors.Is(err, ErrTaxInvalidResponse):
			reason = "invalid"
		}
		s.fallbacks.WithLabelValues(reason).Inc()
		if s.Naive() {
			return zeroQuote(req, reason)
		}
		return s.cachedQuote(req, reason)
	}
	if Deviation(rate, cached) > RateTolerance {
		s.drift.Inc()
	}
	return TaxQuote{Jurisdiction: req.Jurisdiction, AmountCents: req.amount(), Rate: rate,
		TaxCents: TaxCents(req.amount(), rate), Source: SourceTaxAPI}
}

// naiveTax is INC-4491's tax path: a connection and a transaction are taken
// first and held while the tax API answers.
func (s *Service) naiveTax(w http.ResponseWriter, r *http.Request, pool *pgxpool.Pool, req payRequest) {
	actx, cancel := context.WithTimeout(r.Context(), s.cfg.DBTimeout)
	conn, err := pool.Acquire(actx)
	timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		if r.Context().Err() == nil {
			// The shared pool is exhausted: the naive build falls back to
			// zero tax (ADV-UC-01.2's anti-pattern).
			p := s.dbProblem(LaneTax, err, timedOut)
			p.Extra["fallback"] = zeroQuote(req, "database")
			refservices.WriteProblem(w, p, s.cfg.RetryAfter)
		}
		return
	}
	defer conn.Release()
	// The transaction's statements run to their end when the client leaves
	// (see queryOne); only the tax API call follows the client.
	sctx, scancel := refservices.StatementContext(r.Context())
	defer scancel()
	tx, err := conn.Begin(sctx)
	if err != nil {
		s.dbFailure(w, r, LaneTax, err, false)
		return
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(r.Context())) }()
	cached, _ := s.rates.Rate(req.Jurisdiction)
	var id int64
	if err := tx.QueryRow(sctx, insertQuote, req.Jurisdiction, req.amount(), cached, "pending").Scan(&id); err != nil {
		s.dbFailure(w, r, LaneTax, err, false)
		return
	}
	q := s.quote(r.Context(), req) // the connection waits with us
	if r.Context().Err() != nil {
		return
	}
	if _, err := tx.Exec(sctx, updateQuote, id, q.Rate, q.Source); err != nil {
		s.dbFailure(w, r, LaneTax, err, false)
		return
	}
	if err := tx.Commit(sctx); err != nil {
		s.dbFailure(w, r, LaneTax, err, false)
		return
	}
	refservices.WriteJSON(w, http.StatusOK, q)
}

// --- metrics ----------------------------------------------------------------

func (s *Service) registerMetrics() {
	s.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tax_fallback_total",
		Help: "Tax quotes answered from the cached rate table, by reason (shed, timeout, error, invalid, unconfigured).",
	}, []string{"reason"})
	for _, r := range []string{"shed", "timeout", "error", "invalid"} {
		s.fallbacks.WithLabelValues(r)
	}
	s.drift = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tax_cache_drift_total",
		Help: "Tax API rates deviating more than 0.5 % from the cached table (ADV-UC-01).",
	})
	s.retryBlocked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "retry_storm_blocked_total",
		Help: "Requests rejected with ERR_RETRY_STORM_BLOCKED (ADV-IR-01).",
	})
	s.auditFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tax_quote_record_failures_total",
		Help: "Tax quotes answered but not recorded in the database.",
	})
	s.authStatements = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auth_insert_statements_total",
		Help: "INSERT statements the card_auth lane's group-commit writers ran successfully (0 with --auth-batch 1).",
	})
	s.authRows = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auth_insert_rows_total",
		Help: "Card authorizations those statements wrote.",
	})
	s.Registry.MustRegister(s.fallbacks, s.drift, s.retryBlocked, s.auditFailures, s.authStatements, s.authRows, &laneCollector{s: s})
}

var (
	descActive     = prometheus.NewDesc("bulkhead_active_workers", "Workers busy in the lane now.", []string{"lane"}, nil)
	descQueue      = prometheus.NewDesc("bulkhead_queue_depth", "Requests waiting in the lane's queue now.", []string{"lane"}, nil)
	descRejections = prometheus.NewDesc("bulkhead_rejections_total", "Requests the lane rejected as saturated.", []string{"lane"}, nil)
	descAdmitted   = prometheus.NewDesc("bulkhead_admitted_total", "Requests the lane admitted to a worker.", []string{"lane"}, nil)
	descMaxWorkers = prometheus.NewDesc("bulkhead_max_workers", "Workers of the lane's bulkhead (shared in the naive build).", []string{"lane"}, nil)
	descQueueCap   = prometheus.NewDesc("bulkhead_queue_capacity", "Queue capacity of the lane's bulkhead.", []string{"lane"}, nil)
	descState      = prometheus.NewDesc("bulkhead_state", "1 for the lane bulkhead's current MC-ST-01 state, else 0.", []string{"lane", "state"}, nil)
	descPoolUsed   = prometheus.NewDesc("bulkhead_db_pool_acquired_conns", "Connections of the lane's pool in use.", []string{"lane"}, nil)
	descPoolMax    = prometheus.NewDesc("bulkhead_db_pool_max_conns", "Size of the lane's pool (shared in the naive build).", []string{"lane"}, nil)
	descBlocked    = prometheus.NewDesc("bulkhead_blocked_workers", "Workers of the lane's bulkhead blocked on the tax API now (the shared bulkhead's, in the naive build).", []string{"lane"}, nil)
)

// laneCollector reports the bulkheads at scrape time.
type laneCollector struct{ s *Service }

func (c *laneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descQueue, descRejections, descAdmitted, descMaxWorkers, descQueueCap, descState, descPoolUsed, descPoolMax, descBlocked} {
		ch <- d
	}
}

func (c *laneCollector) Collect(ch chan<- prometheus.Metric) {
	ps := c.s.pools.Load()
	for lane := range numLanes {
		name := LaneNames[lane]
		b := c.s.bh[lane]
		st := b.Stats(lane)
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(st.Active), name)
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(st.Queued), name)
		ch <- prometheus.MustNewConstMetric(descRejections, prometheus.CounterValue, float64(st.Rejected), name)
		ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.CounterValue, float64(st.Admitted), name)
		ch <- prometheus.MustNewConstMetric(descMaxWorkers, prometheus.GaugeValue, float64(b.Workers()), name)
		ch <- prometheus.MustNewConstMetric(descQueueCap, prometheus.GaugeValue, float64(b.QueueCapacity()), name)
		ch <- prometheus.MustNewConstMetric(descBlocked, prometheus.GaugeValue, float64(b.BlockedWorkers()), name)
		cur := b.State()
		for _, state := range States {
			v := 0.0
			if state == cur {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, name, state.String())
		}
		var used, max float64
		if ps != nil {
			stat := ps.byLane[lane].Stat()
			used, max = float64(stat.AcquiredConns()), float64(stat.MaxConns())
		}
		ch <- prometheus.MustNewConstMetric(descPoolUsed, prometheus.GaugeValue, used, name)
		ch <- prometheus.MustNewConstMetric(descPoolMax, prometheus.GaugeValue, max, name)
	}
}
