package paymentcore

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/refservices"
	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

const fraudBody = `{"id":"f-1","amountCents":1299}`

type deferredBody struct {
	Type       string `json:"type"`
	Status     int    `json:"status"`
	Code       string `json:"code"`
	Lane       string `json:"lane"`
	Decision   string `json:"decision"`
	Evaluation string `json:"evaluation"`
}

// holdLane takes every worker of lane's bulkhead and returns a func that
// gives them back.
func holdLane(t *testing.T, s *Service, lane int) func() {
	t.Helper()
	b := s.Bulkhead(lane)
	var held []Permit
	for range b.Workers() {
		p, err := b.Acquire(context.Background(), lane)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	return func() {
		for _, p := range held {
			p.Release()
		}
	}
}

// TestFraudLaneDefersToAsyncQueue: a saturated fraud_eval lane bypasses
// synchronous scoring to the asynchronous evaluation queue (MC-PO-01): the
// request is answered at once with 202 and a problem body saying so, the
// queue's counters move, and the evaluators score it on the lane's pool.
// With the queue full too, the lane answers 503 with Retry-After (INV-BH-04).
func TestFraudLaneDefersToAsyncQueue(t *testing.T) {
	pg := testutil.Postgres(t)
	for _, tc := range []struct {
		name         string
		queue        int
		wantStatus   int
		wantCode     string
		wantEnqueued float64
		wantRejected float64
	}{
		{name: "deferred", queue: 100, wantStatus: http.StatusAccepted, wantCode: CodeFraudDeferred, wantEnqueued: 3},
		{name: "no queue", queue: -1, wantStatus: http.StatusServiceUnavailable, wantCode: CodeFraudSaturated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u := startCore(t, Config{DatabaseURL: pg.DSN, Fraud: LaneConfig{Workers: 1, Queue: 0, Pool: 1}, FraudAsyncQueue: tc.queue})
			release := holdLane(t, s, LaneFraud)
			for i := range 3 {
				r := refservicestest.Do(http.MethodPost, u+"/fraud", fraudBody, 5*time.Second)
				var p deferredBody
				_ = json.Unmarshal([]byte(r.Body), &p)
				switch {
				case r.Status != tc.wantStatus || p.Code != tc.wantCode || p.Lane != "fraud_eval":
					t.Errorf("fraud %d on a full lane: %d %q, want %d %s", i, r.Status, r.Body, tc.wantStatus, tc.wantCode)
				case r.Elapsed > time.Second:
					t.Errorf("fraud %d on a full lane took %s; the bypass must not wait", i, r.Elapsed)
				case r.Header.Get("Content-Type") != refservices.ProblemContentType:
					t.Errorf("fraud %d: Content-Type %q, want %s", i, r.Header.Get("Content-Type"), refservices.ProblemContentType)
				case tc.wantStatus == http.StatusAccepted && (p.Decision != "pending" || p.Evaluation != "async" || r.Header.Get("Retry-After") != ""):
					t.Errorf("fraud %d deferred: %q Retry-After %q, want decision pending, evaluation async, no Retry-After", i, r.Body, r.Header.Get("Retry-After"))
				case tc.wantStatus == http.StatusServiceUnavailable && r.Header.Get("Retry-After") != "5":
					t.Errorf("fraud %d rejected: Retry-After %q, want 5", i, r.Header.Get("Retry-After"))
				}
			}
			m := scrape(t, u)
			if v := gauge(m, "fraud_async_enqueued_total", "", ""); v != tc.wantEnqueued {
				t.Errorf("fraud_async_enqueued_total = %v, want %v", v, tc.wantEnqueued)
			}
			if v := gauge(m, "bulkhead_state", "fraud_eval", "SATURATED"); v != 1 {
				t.Errorf("bulkhead_state{fraud_eval,SATURATED} = %v, want 1", v)
			}
			release()
			if tc.wantEnqueued > 0 {
				waitFor(t, func() bool {
					m := scrape(t, u)
					return gauge(m, "fraud_async_evaluated_total", "", "") == tc.wantEnqueued && gauge(m, "fraud_async_queue_depth", "", "") == 0
				})
			}
			if r := refservicestest.Do(http.MethodPost, u+"/fraud", fraudBody, 5*time.Second); r.Status != http.StatusOK {
				t.Errorf("fraud on a free lane: %d %q, want 200", r.Status, r.Body)
			}
		})
	}
}

// TestNaiveFraudHasNoAsyncQueue: the naive build's full shared pool answers
// a bare 503, and its asynchronous queue metrics stay at 0 (INC-4491).
func TestNaiveFraudHasNoAsyncQueue(t *testing.T) {
	pg := testutil.Postgres(t)
	s, u := startCore(t, Config{DatabaseURL: pg.DSN, Build: refservices.BuildNaive, Shared: LaneConfig{Workers: 1, Queue: 0, Pool: 2}})
	release := holdLane(t, s, LaneFraud)
	defer release()
	r := refservicestest.Do(http.MethodPost, u+"/fraud", fraudBody, 5*time.Second)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "" {
		t.Errorf("naive fraud on a full pool: %d Retry-After %q %q, want a bare 503", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	m := scrape(t, u)
	for _, fam := range []string{"fraud_async_enqueued_total", "fraud_async_queue_depth", "fraud_async_rejected_total"} {
		if v := gauge(m, fam, "", ""); v != 0 {
			t.Errorf("naive %s = %v, want 0", fam, v)
		}
	}
}

// TestFraudAsyncConfig: the queue and its evaluators default to 10,000 and
// 2, -1 turns the queue off, and bad values name their flags.
func TestFraudAsyncConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		cfg            Config
		queue, workers int
		err            string
	}{
		{"default", Config{}, DefaultFraudAsyncQueue, DefaultFraudAsyncWorkers, ""},
		{"no queue", Config{FraudAsyncQueue: -1}, -1, DefaultFraudAsyncWorkers, ""},
		{"set", Config{FraudAsyncQueue: 50, FraudAsyncWorkers: 4}, 50, 4, ""},
		{"bad queue", Config{FraudAsyncQueue: -2}, -2, DefaultFraudAsyncWorkers, "--fraud-async-queue: must be >= 1, or -1 for none, got -2"},
		{"bad workers", Config{FraudAsyncWorkers: -1}, DefaultFraudAsyncQueue, -1, "--fraud-async-workers: must be >= 1, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.cfg
			c.DatabaseURL = "postgres://drill@127.0.0.1:5432/drill"
			c.SetDefaults()
			if c.FraudAsyncQueue != tc.queue || c.FraudAsyncWorkers != tc.workers {
				t.Errorf("queue %d, workers %d; want %d, %d", c.FraudAsyncQueue, c.FraudAsyncWorkers, tc.queue, tc.workers)
			}
			err := c.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Errorf("Validate: %v, want %q", err, tc.err)
			}
		})
	}
}
