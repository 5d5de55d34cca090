package refservices

import (
	"context"
	"log/slog"
	"time"
)

// Back-off of [RetryOpen] and the pace of [Health.WaitStarted].
const (
	openBackoffFirst = 200 * time.Millisecond
	openBackoffMax   = 2 * time.Second
	startRetryEvery  = 500 * time.Millisecond
)

// Sleep waits d, or less when ctx is done first; it reports whether the
// whole of d passed (false: ctx is done).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// RetryOpen calls open (e.g. "open the database pools and create the
// schema") until it returns nil, waiting 200 ms after the first failure and
// twice as long after each further one, up to 2 s; each failure is logged
// as "database not reachable yet". It reports whether open succeeded
// (false: ctx ended first).
func RetryOpen(ctx context.Context, logger *slog.Logger, open func(ctx context.Context) error) bool {
	backoff := openBackoffFirst
	for {
		err := open(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		logger.Warn("database not reachable yet", "err", err, "retryIn", backoff)
		if !Sleep(ctx, backoff) {
			return false
		}
		backoff = min(backoff*2, openBackoffMax)
	}
}

// WaitStarted calls [Health.TryStart] every 500 ms until the service has
// started (ADR 0077) or ctx is done, and reports [Health.Started].
func (h *Health) WaitStarted(ctx context.Context) bool {
	for !h.TryStart(ctx) {
		if !Sleep(ctx, startRetryEvery) {
			return h.Started()
		}
	}
	return true
}
