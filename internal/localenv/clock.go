package localenv

import "time"

// clock is the time source a replica schedules by: probe times (initial
// delay, period), restart back-off and the termination grace period, and
// the start and finish times of its container instances. Production uses
// [realClock]; the package's tests substitute a fake one to pin the
// kubelet's timing rules against exact times. Probe I/O timeouts and the
// stop safety net are not scheduling and stay on real time.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) clockTimer
	NewTicker(d time.Duration) clockTicker
}

// clockTimer is a one-shot timer of a [clock].
type clockTimer interface {
	C() <-chan time.Time
	Stop() bool
}

// clockTicker is a periodic ticker of a [clock]; like [time.Ticker] it
// drops ticks a slow receiver misses.
type clockTicker interface {
	C() <-chan time.Time
	Stop()
}

// realClock is the machine's clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) clockTimer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) clockTicker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }
