package ordergateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Defaults of the payment vendor's client (Config.VendorURL).
const (
	// DefaultVendorTimeout bounds the correct build's vendor call: 250 ms.
	DefaultVendorTimeout = 250 * time.Millisecond
	// breakerFailures is how many vendor calls in a row fail before the
	// correct build's circuit breaker opens.
	breakerFailures = 5
	// breakerOpenFor is how long the breaker stays open before one trial
	// call (half-open) may close it again.
	breakerOpenFor = 5 * time.Second
)

// breaker is the correct build's circuit breaker on the vendor
// (HEALTH-ORD-001 MC-CF-01: a third-party API's degradation is handled by
// a circuit breaker, not by readiness): closed, it lets every call
// through; after breakerFailures failures in a row it opens and no call
// goes out for breakerOpenFor; then one trial call at a time decides
// whether it closes again. Safe for concurrent use.
type breaker struct {
	mu       sync.Mutex
	failures int       // consecutive failures while closed
	openedAt time.Time // zero: closed
	trial    bool      // a half-open trial call is out
}

// allow reports whether a call may go out now.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openedAt.IsZero() {
		return true
	}
	if now.Sub(b.openedAt) < breakerOpenFor || b.trial {
		return false
	}
	b.trial = true
	return true
}

// done records a call's outcome and reports whether the breaker changed
// state (opened or closed).
func (b *breaker) done(now time.Time, ok bool) (changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wasOpen := !b.openedAt.IsZero()
	switch {
	case ok:
		b.failures, b.openedAt, b.trial = 0, time.Time{}, false
		return wasOpen
	case wasOpen: // the trial failed: open again
		b.openedAt, b.trial = now, false
		return false
	}
	b.failures++
	if b.failures >= breakerFailures {
		b.openedAt, b.failures = now, 0
		return true
	}
	return false
}

// open reports whether the breaker is open (or half-open).
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openedAt.IsZero()
}

// callVendor authorizes an order's payment with the vendor. The correct
// build bounds the call by Config.VendorTimeout and goes through the
// breaker: it returns pending=true (payment deferred, the order still
// accepted) when the call fails or the breaker is open. The naive build
// waits for the vendor within ctx alone and returns its error.
func (s *Service) callVendor(ctx context.Context) (pending bool, err error) {
	if s.cfg.VendorURL == "" {
		return false, nil
	}
	if s.Naive() {
		return false, s.getVendor(ctx)
	}
	now := time.Now()
	if !s.breaker.allow(now) {
		return true, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.VendorTimeout)
	err = s.getVendor(cctx)
	cancel()
	if ctx.Err() != nil {
		return false, ctx.Err() // the client went away: not the vendor's fault
	}
	if s.breaker.done(time.Now(), err == nil) {
		s.Logger.Info("vendor circuit breaker", "open", s.breaker.open(), "err", err)
	}
	return err != nil, nil
}

// getVendor GETs Config.VendorURL within ctx; a transport error or a 5xx
// is an error.
func (s *Service) getVendor(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.VendorURL, nil)
	if err != nil {
		return fmt.Errorf("vendor: %w", err)
	}
	res, err := s.vendor.Do(req)
	if err != nil {
		return fmt.Errorf("vendor: %w", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode >= 500 {
		return fmt.Errorf("vendor: %s answered %d", s.cfg.VendorURL, res.StatusCode)
	}
	return nil
}
