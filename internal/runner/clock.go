package runner

import (
	"time"

	"github.com/drillhq/drill/internal/event"
)

// timelineClock is the time the fault scheduler and the stop watcher go
// by: offsets on the run's clock (t=0 when load started) and timers on
// it. A run uses [runClock]; tests drive a fake one.
type timelineClock interface {
	// Now is the current offset.
	Now() time.Duration
	// NewTimer fires once, d from now.
	NewTimer(d time.Duration) clockTimer
	// NewTicker fires every d from now.
	NewTicker(d time.Duration) clockTimer
}

// clockTimer is a timer or a ticker of a [timelineClock].
type clockTimer interface {
	// C delivers the firings.
	C() <-chan time.Time
	// Stop stops further firings.
	Stop()
}

// runClock is the run's own clock with the runtime's timers.
type runClock struct{ *event.Clock }

// NewTimer is time.NewTimer.
func (runClock) NewTimer(d time.Duration) clockTimer { return stdTimer{time.NewTimer(d)} }

// NewTicker is time.NewTicker.
func (runClock) NewTicker(d time.Duration) clockTimer { return stdTicker{time.NewTicker(d)} }

type stdTimer struct{ t *time.Timer }

func (t stdTimer) C() <-chan time.Time { return t.t.C }
func (t stdTimer) Stop()               { t.t.Stop() }

type stdTicker struct{ t *time.Ticker }

func (t stdTicker) C() <-chan time.Time { return t.t.C }
func (t stdTicker) Stop()               { t.t.Stop() }
