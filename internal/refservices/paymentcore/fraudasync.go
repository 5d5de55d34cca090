package paymentcore

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drillhq/drill/internal/refservices"
)

// CodeFraudDeferred is the code of the 202 problem body a saturated
// fraud_eval lane answers when it hands the request to its asynchronous
// evaluation queue (BULKHEAD-PAY-001 MC-PO-01: "bypass synchronous scoring
// to asynchronous evaluation queue").
const CodeFraudDeferred = "FRAUD_SCORING_DEFERRED"

// Defaults of the asynchronous evaluation queue ([Config.FraudAsyncQueue],
// [Config.FraudAsyncWorkers]).
const (
	DefaultFraudAsyncQueue   = 10000
	DefaultFraudAsyncWorkers = 2
)

// fraudJob is one fraud evaluation deferred to the asynchronous queue.
type fraudJob struct {
	card        string
	amountCents int64
	queuedAt    time.Time
}

// fraudQueue is the fraud_eval lane's asynchronous evaluation queue: a
// bounded FIFO of deferred evaluations that a fixed number of evaluators
// score in the background on the lane's own pool (never on card_auth's:
// INV-BH-01). It exists in the correct build only; the naive build's
// shared pool has no such queue (INC-4491).
type fraudQueue struct {
	jobs    chan fraudJob
	workers int
	timeout time.Duration // each evaluation's database work

	depth     prometheus.GaugeFunc
	enqueued  prometheus.Counter
	evaluated prometheus.Counter
	failed    prometheus.Counter
	rejected  prometheus.Counter
	wait      prometheus.Histogram
}

// newFraudQueue returns a queue of capacity jobs (0: a queue that takes
// nothing, whose offers all fail) scored by workers evaluators, each
// evaluation's database work bounded by timeout. Its metrics are
// registered on reg in either build, so a drill reads the same series
// from both.
func newFraudQueue(capacity, workers int, timeout time.Duration, reg prometheus.Registerer) *fraudQueue {
	q := &fraudQueue{jobs: make(chan fraudJob, capacity), workers: workers, timeout: timeout}
	q.depth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fraud_async_queue_depth",
		Help: "Fraud evaluations waiting in the asynchronous evaluation queue now (MC-PO-01 fraud_eval rejection policy).",
	}, func() float64 { return float64(len(q.jobs)) })
	q.enqueued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fraud_async_enqueued_total",
		Help: "Fraud requests the saturated fraud_eval lane deferred to the asynchronous evaluation queue (answered 202).",
	})
	q.evaluated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fraud_async_evaluated_total",
		Help: "Deferred fraud evaluations scored by the asynchronous evaluators.",
	})
	q.failed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fraud_async_failed_total",
		Help: "Deferred fraud evaluations whose database work failed.",
	})
	q.rejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fraud_async_rejected_total",
		Help: "Fraud requests rejected with 503 because the asynchronous evaluation queue was full too.",
	})
	q.wait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fraud_async_wait_seconds",
		Help:    "Time a deferred fraud evaluation waited in the queue before an evaluator took it, in seconds.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60},
	})
	reg.MustRegister(q.depth, q.enqueued, q.evaluated, q.failed, q.rejected, q.wait)
	return q
}

// offer queues job without waiting and reports whether it was taken. A
// full queue counts the request as rejected.
func (q *fraudQueue) offer(job fraudJob) bool {
	select {
	case q.jobs <- job:
		q.enqueued.Inc()
		return true
	default:
		q.rejected.Inc()
		return false
	}
}

// run starts the evaluators with b.Go; each scores jobs with score on the
// pool pool returns (nil while the pools are not open yet: the job waits)
// until ctx is done. Jobs still queued then are dropped with the process.
func (q *fraudQueue) run(ctx context.Context, b *refservices.Base, pool func() *pgxpool.Pool) {
	for range q.workers {
		b.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-q.jobs:
					q.wait.Observe(time.Since(job.queuedAt).Seconds())
					q.evaluate(ctx, b, pool, job)
				}
			}
		})
	}
}

// evaluate scores one deferred job as the synchronous path would (the
// card's authorisations of the last minute), retrying while the pools are
// not open yet.
func (q *fraudQueue) evaluate(ctx context.Context, b *refservices.Base, pool func() *pgxpool.Pool, job fraudJob) {
	p := pool()
	for p == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		p = pool()
	}
	qctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	var recent int64
	if err := p.QueryRow(qctx, countFraud, job.card).Scan(&recent); err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) {
			q.failed.Inc()
			b.Logger.Debug("deferred fraud evaluation failed", "err", err)
		}
		return
	}
	q.evaluated.Inc()
}

// deferFraud answers a fraud request its saturated lane could not admit
// from the asynchronous queue: 202 with a problem body saying the scoring
// was deferred (code [CodeFraudDeferred], decision "pending", no
// Retry-After: the caller has nothing to retry). It reports false when
// there is no queue (naive build) or the queue is full; the caller then
// rejects the request as saturated.
func (s *Service) deferFraud(w http.ResponseWriter, req payRequest) bool {
	if s.fraudAsync == nil || !s.fraudAsync.offer(fraudJob{card: req.card(), amountCents: req.amount(), queuedAt: time.Now()}) {
		return false
	}
	refservices.WriteProblem(w, refservices.Problem{
		Type:   "urn:drill:problem:fraud-scoring-deferred",
		Title:  "Fraud scoring deferred",
		Status: http.StatusAccepted,
		Code:   CodeFraudDeferred,
		Detail: "every fraud_eval worker is busy; the request was queued for asynchronous evaluation",
		Extra:  map[string]any{"lane": LaneNames[LaneFraud], "decision": "pending", "evaluation": "async"},
	}, 0)
	return true
}
