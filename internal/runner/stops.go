package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/scenario"
)

// stopWatcher evaluates a run's stop conditions once a second and carries
// out the action of each that fires (once): end-faults ends every fault;
// load also stops the load (the timeline runs on, its windows judged);
// abort also aborts the run (exit 3, the stop condition named) and ends
// the timeline. Each firing is logged and leaves a stop-condition event
// at the clock's offset; the faults it ends leave fault-off events whose
// detail is "stop condition NAME".
type stopWatcher struct {
	clock timelineClock
	log   *slog.Logger
	evlog *event.Log
	conds []scenario.StopCondition
	// live returns each stream's figures over the last second.
	live func() []load.StreamLive
	// faults are ended by every action.
	faults *faultScheduler
	// stopLoad ends the load alone; stopTimeline ends the whole timeline;
	// abort records why the run aborted.
	stopLoad, stopTimeline func()
	abort                  func(error)

	// since is when each condition's stream went above its threshold (-1:
	// it is not above); fired marks the conditions that fired. Used by
	// one goroutine (run's).
	since []time.Duration
	fired []bool
}

// run checks the conditions once a second until ctx ends.
func (w *stopWatcher) run(ctx context.Context) {
	if len(w.conds) == 0 {
		return
	}
	tick := w.clock.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		w.check(w.clock.Now())
	}
}

// check evaluates every condition that has not fired yet at offset now,
// on the streams' figures over the last second, and fires those whose
// stream has been above the threshold for the condition's For (since
// the first check that saw it above, without a check in between that
// saw it at or below).
func (w *stopWatcher) check(now time.Duration) {
	if w.since == nil {
		w.since = make([]time.Duration, len(w.conds))
		w.fired = make([]bool, len(w.conds))
		for i := range w.since {
			w.since[i] = -1
		}
	}
	live := map[string]load.StreamLive{}
	for _, l := range w.live() {
		live[l.Stream] = l
	}
	for i, sc := range w.conds {
		if w.fired[i] {
			continue
		}
		l, ok := live[sc.Stream]
		if !ok || l.ErrorRate <= sc.ErrorRateAbove {
			w.since[i] = -1
			continue
		}
		if w.since[i] < 0 {
			w.since[i] = now
		}
		if now-w.since[i] < sc.For.D() {
			continue
		}
		w.fired[i] = true
		w.fire(sc, l, now)
	}
}

// fire carries out sc's action at offset now; l is the figure that fired it.
func (w *stopWatcher) fire(sc scenario.StopCondition, l load.StreamLive, now time.Duration) {
	action := sc.Action
	if action == "" {
		action = scenario.StopEndFaults
	}
	detail := fmt.Sprintf("%s: %s error rate %.1f%% above %.1f%% for %s; action %s", sc.Name, sc.Stream, 100*l.ErrorRate, 100*sc.ErrorRateAbove, sc.For.D(), action)
	w.log.Warn("stop condition fired", "detail", detail)
	w.evlog.Emit(event.Event{At: now, Kind: event.StopFired, Source: "run", Detail: detail})
	switch action {
	case scenario.StopEndFaults:
		w.faults.endAll("stop condition " + sc.Name)
	case scenario.StopLoad:
		w.faults.endAll("stop condition " + sc.Name)
		w.stopLoad()
	case scenario.StopAbort:
		w.faults.endAll("stop condition " + sc.Name)
		w.abort(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("aborted by stop condition %s", detail)))
		w.stopTimeline()
	}
}
