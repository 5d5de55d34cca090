package ordergateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/refservices"
	"github.com/drillhq/drill/internal/refservices/refservicestest"
	"github.com/drillhq/drill/internal/testutil"
)

// TestClientGoneKeepsConnection: with one INSERT per request, a client
// that gives up while its order's statement waits on a lock does not cut
// the statement off, so the order is written once the lock goes and the
// pool keeps its one PostgreSQL backend (no reconnect), in both builds.
// insertLike matches an order's INSERT in pg_stat_activity.
const insertLike = "INSERT INTO orders%"

func TestClientGoneKeepsConnection(t *testing.T) {
	for _, build := range []refservices.Build{refservices.BuildCorrect, refservices.BuildNaive} {
		t.Run(string(build), func(t *testing.T) {
			pg := testutil.Postgres(t)
			_, u := startGateway(t, Config{DatabaseURL: pg.DSN, Build: build, PoolSize: 1, MaxBatch: 1, DBTimeout: 30 * time.Second})
			refservicestest.WaitStatus(t, u+refservices.PathStartup, http.StatusOK, 20*time.Second)
			if r := refservicestest.Do(http.MethodPost, u+"/orders", `{"id":"before"}`, 5*time.Second); r.Status != http.StatusCreated {
				t.Fatalf("first order: %d %q", r.Status, r.Body)
			}
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			before := refservicestest.Backends(t, conn, insertLike)
			if len(before) != 1 {
				t.Fatalf("backends that wrote orders: %v, want the pool's one", before)
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "LOCK TABLE orders IN EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			// The statement waits on the lock; the client gives up after 300 ms.
			if r := refservicestest.Do(http.MethodPost, u+"/orders", `{"id":"gone"}`, 300*time.Millisecond); r.Err == nil {
				t.Fatalf("order behind the lock answered %d %q; want the client's timeout", r.Status, r.Body)
			}
			waiting := refservicestest.LockWaiters(t, tx, insertLike)
			if waiting != 1 {
				t.Fatalf("%d INSERTs wait on the lock after the client left; want the one statement, still running", waiting)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if r := refservicestest.Do(http.MethodPost, u+"/orders", `{"id":"after"}`, 5*time.Second); r.Status != http.StatusCreated {
				t.Fatalf("order after the lock: %d %q", r.Status, r.Body)
			}
			var written int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM orders WHERE order_id IN ('before', 'gone', 'after')`).Scan(&written); err != nil {
				t.Fatal(err)
			}
			if written != 3 {
				t.Errorf("%d of the 3 orders written; the gone client's statement must finish", written)
			}
			if after := refservicestest.Backends(t, conn, insertLike); len(after) != 1 || after[0] != before[0] {
				t.Errorf("the pool's backend was %v and is now %v; a client that left must not cost a reconnect", before, after)
			}
		})
	}
}
