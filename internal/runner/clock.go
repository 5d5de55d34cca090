package runner

import (
	"time"

	"github.com/drillhq/drill/internal/clock"
	"github.com/drillhq/drill/internal/event"
)

// timelineClock is the time the fault scheduler and the stop watcher go
// by: offsets on the run's clock (t=0 when load started) and timers on
// it. A run uses [runClock]; tests drive a fake one.
type timelineClock = clock.Clock[time.Duration]

// runClock is the run's own clock with the runtime's timers.
func runClock(c *event.Clock) timelineClock { return clock.Real(c.Now) }
