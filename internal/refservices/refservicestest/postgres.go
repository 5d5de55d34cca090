package refservicestest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Backends returns, sorted, the PIDs of the PostgreSQL backends of conn's
// database (other than conn's own) whose current or last statement is
// LIKE like: which pooled connection ran a service's statement. Errors
// fail the test.
func Backends(tb testing.TB, conn *pgx.Conn, like string) []int32 {
	tb.Helper()
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE $1 ORDER BY pid`, like)
	if err != nil {
		tb.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		tb.Fatal(err)
	}
	return pids
}

// LockWaiters counts the statements LIKE like that wait on a lock, read
// in tx (the transaction holding it). Errors fail the test.
func LockWaiters(tb testing.TB, tx pgx.Tx, like string) int {
	tb.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, like).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
