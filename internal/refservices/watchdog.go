package refservices

import (
	"context"
	"sync/atomic"
	"time"
)

// Watchdog is the in-process heartbeat a liveness probe answers from
// (HEALTH-ORD-001 MC-PS-01 "internal health watchdog is kicking";
// INV-HLT-01: no network I/O). A goroutine kicks it every Interval; the
// process counts as live while the last kick is younger than the stall
// threshold. It stalls only when the Go scheduler cannot run that
// goroutine (a wedged runtime, a process frozen with SIGSTOP) or when
// [Watchdog.Stop] was called (the debug hook that simulates a deadlock).
//
// The zero value is not usable; use [NewWatchdog]. Methods are safe for
// concurrent use.
type Watchdog struct {
	interval time.Duration
	stall    time.Duration
	base     time.Time
	last     atomic.Int64 // ns since base of the last kick
	stopped  atomic.Bool
}

// NewWatchdog returns a watchdog kicked every interval (default 100ms when
// <= 0) that reports a stall once no kick happened for stall (default 5s
// when <= 0). It counts as kicked at creation.
func NewWatchdog(interval, stall time.Duration) *Watchdog {
	if interval <= 0 {
		interval = DefaultWatchdogInterval
	}
	if stall <= 0 {
		stall = DefaultWatchdogStall
	}
	return &Watchdog{interval: interval, stall: stall, base: time.Now()}
}

// Run kicks the watchdog every interval until ctx is done.
func (w *Watchdog) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	w.kick()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !w.stopped.Load() {
				w.kick()
			}
		}
	}
}

func (w *Watchdog) kick() { w.last.Store(int64(time.Since(w.base))) }

// Stop stops kicking for good, so [Watchdog.Stalled] turns true after the
// stall threshold: it simulates a deadlocked process for drills of the
// liveness probe.
func (w *Watchdog) Stop() { w.stopped.Store(true) }

// Age is the time since the last kick.
func (w *Watchdog) Age() time.Duration {
	return time.Since(w.base) - time.Duration(w.last.Load())
}

// Stalled reports whether the last kick is older than the stall threshold.
func (w *Watchdog) Stalled() bool { return w.Age() > w.stall }
