package paymentcore

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

// TestClientGoneKeepsConnection: a client that gives up while its
// statement waits (a card authorization written alone, --auth-batch 1, or
// a fraud check) does not cut the statement off: it finishes when the
// table is free, on the same pooled connection, and no new PostgreSQL
// backend is opened for the lane. (Cut off mid-statement, pgx closes the
// pooled connection, and a busy service pays a reconnect per client that
// leaves.)
func TestClientGoneKeepsConnection(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, lock, stmt string
	}{
		// The INSERT waits on a lock that keeps writers out; the SELECT on
		// one that keeps readers out too.
		{"auth", "/auth", authBody, "EXCLUSIVE", "INSERT INTO pay_auths%"},
		{"fraud", "/fraud", authBody, "ACCESS EXCLUSIVE", "SELECT count(*) FROM pay_auths%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := testutil.Postgres(t)
			one := LaneConfig{Workers: 4, Queue: 4, QueueTimeout: time.Second, Pool: 1}
			_, u := startCore(t, Config{DatabaseURL: pg.DSN, AuthBatch: 1, Auth: one, Fraud: one, DBTimeout: 30 * time.Second})
			if r := refservicestest.Do(http.MethodPost, u+tc.path, tc.body, 5*time.Second); r.Status != http.StatusOK {
				t.Fatalf("first request: %d %q", r.Status, r.Body)
			}
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			before := refservicestest.Backends(t, conn, tc.stmt)
			if len(before) != 1 {
				t.Fatalf("backends that ran the lane's statement: %v, want the pool's one", before)
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE pay_auths IN "+tc.lock+" MODE"); err != nil {
				t.Fatal(err)
			}
			if r := refservicestest.Do(http.MethodPost, u+tc.path, tc.body, 300*time.Millisecond); r.Err == nil {
				t.Fatalf("request behind the lock answered %d %q; want the client's timeout", r.Status, r.Body)
			}
			waiting := refservicestest.LockWaiters(t, tx, tc.stmt)
			if waiting != 1 {
				t.Fatalf("%d statements wait on the lock after the client left; want the one, still running", waiting)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if r := refservicestest.Do(http.MethodPost, u+tc.path, tc.body, 5*time.Second); r.Status != http.StatusOK {
				t.Fatalf("request after the lock: %d %q", r.Status, r.Body)
			}
			if after := refservicestest.Backends(t, conn, tc.stmt); len(after) != 1 || after[0] != before[0] {
				t.Errorf("the lane's backend was %v and is now %v; a client that left must not cost a reconnect", before, after)
			}
		})
	}
}
