// Package sleep waits for a duration unless a context ends first, on the
// machine's clock or on a clock a test controls. It imports nothing of
// drill, so any layer may use it.
package sleep

import (
	"context"
	"time"
)

// Timer is a one-shot timer: C delivers once when it fires, Stop stops it.
// A fake clock in a test provides its own.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// For sleeps for d. It returns true when d passed and false when ctx ended
// first. A d of zero or less returns at once: true unless ctx has ended.
func For(ctx context.Context, d time.Duration) bool {
	return On(ctx, d, realTimer)
}

// On is [For] on the timers newTimer makes (a fake clock's in tests).
func On(ctx context.Context, d time.Duration, newTimer func(time.Duration) Timer) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := newTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// timer adapts *time.Timer to [Timer].
type timer struct{ t *time.Timer }

func (t timer) C() <-chan time.Time { return t.t.C }
func (t timer) Stop() bool          { return t.t.Stop() }

func realTimer(d time.Duration) Timer { return timer{time.NewTimer(d)} }
