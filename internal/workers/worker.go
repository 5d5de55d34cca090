package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/load"
)

// RunWorker runs worker index of spec.Workers: its share of every stream
// ([load.Partition]), timed from spec.Start, writing its lines to out (see
// the package doc): ready (with how late it started), every closed second,
// alive once a second, done. It returns when the schedule is over or ctx
// ended. Errors: a bad spec or index, streams the engine refuses, or out
// failing; a worker that fell behind schedule is not an error here (its
// done line says so, and the coordinator judges the merged seconds).
// reading, when not nil, is the worker's clock reading ([MeasureClock]),
// reported in its ready line.
func RunWorker(ctx context.Context, spec Spec, index int, out io.Writer, reading *ClockReading, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("worker spec: %w", err)
	}
	if index < 0 || index >= spec.Workers {
		return fmt.Errorf("worker index %d must be within 0..%d", index, spec.Workers-1)
	}
	lw := &lineWriter{w: out}
	// The run's clock: t=0 is the shared absolute start (wall clock, the
	// only clock workers on different nodes share).
	clock := event.NewClockAt(spec.Start)
	eng, err := load.New(clock, spec.Streams, load.Options{
		RunID:     spec.RunID,
		Seconds:   lw,
		Partition: load.Partition{Index: index, Count: spec.Workers},
	}, log)
	if err != nil {
		return fmt.Errorf("worker %d: %w", index, err)
	}
	now := clock.Now()
	ready := Status{Event: EventReady, Index: index, At: now, Clock: reading}
	if late := now - spec.FirstStart(); late > 0 {
		ready.Late = late
		log.Warn("worker started after the run's t=0: its first hits go out late", "worker", index, "late", late)
	}
	if err := lw.writeStatus(ready); err != nil {
		return fmt.Errorf("worker %d: %w", index, err)
	}
	log.Info("worker ready", "worker", index, "of", spec.Workers, "t0", spec.Start, "in", -now)

	alive, stopAlive := context.WithCancel(ctx)
	aliveDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-alive.Done():
				aliveDone <- nil
				return
			case <-tick.C:
				if err := lw.writeStatus(Status{Event: EventAlive, Index: index, At: clock.Now()}); err != nil {
					aliveDone <- err
					return
				}
			}
		}
	}()
	runErr := eng.Run(ctx)
	stopAlive()
	aliveErr := <-aliveDone
	done := Status{Event: EventDone, Index: index, At: clock.Now()}
	for _, l := range eng.Live(time.Second) {
		done.Sent += l.Sent
		done.LateRequests += l.Late
	}
	if v := eng.Validity(); v != nil {
		done.Error = v.Error()
	}
	werr := lw.writeStatus(done)
	return errors.Join(runErr, aliveErr, eng.SecondsErr(), werr)
}
