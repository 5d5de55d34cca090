package paymentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

// TestAuthBatchWritesEachAuthOnce: authorizations queued while the lane's
// pool is busy are written in a few statements once it frees, each exactly
// once, and each answer carries the id of its own row (the card and amount
// it sent).
func TestAuthBatchWritesEachAuthOnce(t *testing.T) {
	pg := testutil.Postgres(t)
	s, u := startCore(t, Config{DatabaseURL: pg.DSN, DBTimeout: 20 * time.Second,
		Auth: LaneConfig{Workers: 75, Queue: 10, Pool: 2}})
	if s.auths == nil || s.cfg.AuthBatchWriters != 2 {
		t.Fatalf("batcher %v with %d writers, want the default group commit with 2", s.auths, s.cfg.AuthBatchWriters)
	}
	pool := s.pools.Load().byLane[LaneAuth]
	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}

	const n = 40
	type answer struct {
		card   string
		amount int64
		resp   refservicestest.Response
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		answers[i].card, answers[i].amount = fmt.Sprintf("tok_batch_%02d", i), int64(1000+i)
		body := fmt.Sprintf(`{"card":%q,"amountCents":%d,"currency":"USD"}`, answers[i].card, answers[i].amount)
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].resp = refservicestest.Do(http.MethodPost, u+"/auth", body, 30*time.Second)
		}()
	}
	waitFor(t, func() bool { return s.auths.queued.Load() == n })
	for _, c := range held {
		c.Release()
	}
	wg.Wait()

	seen := map[int64]bool{}
	for i, a := range answers {
		var body struct {
			ID     int64  `json:"authorizationId"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(a.resp.Body), &body); a.resp.Status != http.StatusOK || err != nil || body.Status != "approved" {
			t.Fatalf("auth %d: %d %q, want 200 approved", i, a.resp.Status, a.resp.Body)
		}
		if seen[body.ID] {
			t.Fatalf("auth %d: id %d answered twice", i, body.ID)
		}
		seen[body.ID] = true
		var card string
		var amount int64
		if err := pool.QueryRow(context.Background(), `SELECT card, amount_cents FROM pay_auths WHERE id = $1`, body.ID).Scan(&card, &amount); err != nil {
			t.Fatalf("auth %d: row %d: %v", i, body.ID, err)
		}
		if card != a.card || amount != a.amount {
			t.Errorf("auth %d: row %d holds %s %d, want its own %s %d", i, body.ID, card, amount, a.card, a.amount)
		}
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pay_auths WHERE card LIKE 'tok_batch_%'`).Scan(&rows); err != nil || rows != n {
		t.Fatalf("pay_auths holds %d of the batch's rows (%v), want %d", rows, err, n)
	}
	m := scrape(t, u)
	stmts, written := gauge(m, "auth_insert_statements_total", "", ""), gauge(m, "auth_insert_rows_total", "", "")
	if written != n || stmts < 1 || stmts > 4 {
		t.Errorf("group commit: %v statements wrote %v rows, want %d rows in at most 4 (two held batches and the queue)", stmts, written, n)
	}
}

// TestAuthBatchConfig: the writers default to 2 but never exceed the pool
// they write on, and the flags are checked.
func TestAuthBatchConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		writers int
		err     string
	}{
		{"default", Config{}, 2, ""},
		{"one-connection lane", Config{Auth: LaneConfig{Workers: 1, Pool: 1}}, 1, ""},
		{"naive uses the shared pool", Config{Build: "naive", Shared: LaneConfig{Workers: 4, Pool: 1}}, 1, ""},
		{"more writers than connections", Config{AuthBatchWriters: 41}, 41, "--auth-batch-writers: must be between 1 and --auth-pool (40), got 41"},
		{"negative batch", Config{AuthBatch: -1}, 2, "--auth-batch: must be >= 1, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.DatabaseURL = "postgres://drill@127.0.0.1:5432/drill"
			c.SetDefaults()
			if c.AuthBatchWriters != tc.writers {
				t.Errorf("writers %d, want %d", c.AuthBatchWriters, tc.writers)
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
