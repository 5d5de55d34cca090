// Package clock is the time source that code schedules by, so that a test
// can put a fake clock in its place and pin timing rules against exact
// times. It imports nothing of drill, so any layer may use it.
package clock

import "time"

// Clock reads the time and makes timers and tickers on it. T is what
// [Clock.Now] reads: a [time.Time] for the machine's clock, a
// [time.Duration] for an offset on a run's clock (t=0 when load started).
// Production uses [Real]; a fake one moves only when its test says so.
type Clock[T any] interface {
	// Now is the current time.
	Now() T
	// NewTimer fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d from now (d > 0).
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer of a [Clock], as [time.Timer].
type Timer interface {
	// C delivers the firing.
	C() <-chan time.Time
	// Stop stops the timer; false if it had already fired or been stopped.
	Stop() bool
}

// Ticker is a periodic ticker of a [Clock]; like [time.Ticker] it drops
// the ticks a slow receiver misses.
type Ticker interface {
	// C delivers the ticks.
	C() <-chan time.Time
	// Stop stops further ticks.
	Stop()
}

// Real is the clock that reads the time from now (e.g. [time.Now], or the
// offset on a run's clock) and times with the Go runtime's timers.
func Real[T any](now func() T) Clock[T] { return realClock[T]{now} }

type realClock[T any] struct{ now func() T }

func (c realClock[T]) Now() T { return c.now() }

func (realClock[T]) NewTimer(d time.Duration) Timer { return timer{time.NewTimer(d)} }

func (realClock[T]) NewTicker(d time.Duration) Ticker { return ticker{time.NewTicker(d)} }

type timer struct{ t *time.Timer }

func (t timer) C() <-chan time.Time { return t.t.C }
func (t timer) Stop() bool          { return t.t.Stop() }

type ticker struct{ t *time.Ticker }

func (t ticker) C() <-chan time.Time { return t.t.C }
func (t ticker) Stop()               { t.t.Stop() }
