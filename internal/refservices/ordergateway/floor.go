package ordergateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// errTooLate answers an order whose deadline is too close for its INSERT
// to finish: it wraps [context.DeadlineExceeded], so the handler answers
// it as a database timeout (503 ERR_ORDER_DB_TIMEOUT), as it would have
// at the deadline.
var errTooLate = fmt.Errorf("too little time left before the order's deadline to write it: %w", context.DeadlineExceeded)

// writeFloor is deadline-aware admission for the order path's INSERTs:
// an INSERT that starts with less time left than the database takes
// would be cut off by its deadline mid-statement, and pgx then closes
// its pooled connection (the deadline interrupts the read), so the pool
// dials a new one and PostgreSQL forks a backend for it. Under overload,
// with orders reaching a connection just before their deadline, that is
// a connection per timed-out order (measured: about 20 new sessions a
// second and a whole core of PostgreSQL's CPU in orders-overload-routing
// on a 2-core machine). The floor is twice the smoothed duration of
// recent successful INSERTs, at most limit; an order with less time left
// is answered as timed out at once, without starting the statement.
// Zero value: no floor until the first INSERT succeeds. Safe for
// concurrent use.
type writeFloor struct {
	// limit caps the floor (ns): a tenth of DBTimeout.
	limit time.Duration
	// smoothed is the exponentially weighted mean (ns, weight 1/8) of
	// successful INSERT durations; 0 before the first.
	smoothed atomic.Int64
}

// observe records the duration of a successful INSERT.
func (f *writeFloor) observe(d time.Duration) {
	for {
		old := f.smoothed.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/8
		}
		if f.smoothed.CompareAndSwap(old, next) {
			return
		}
	}
}

// floor is the least time (ns) an INSERT should have left when it starts.
func (f *writeFloor) floor() time.Duration {
	return min(2*time.Duration(f.smoothed.Load()), f.limit)
}

// tooLate reports whether ctx's deadline leaves less than the floor; a
// context without deadline is never too late.
func (f *writeFloor) tooLate(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < f.floor()
}
