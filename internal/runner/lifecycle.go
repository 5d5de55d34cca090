package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/observe"
)

// run is the whole drill; see [Run].
func (r *run) run(ctx context.Context) (Result, error) {
	start := time.Now()
	r.log.Info("run starting", "file", r.sc.File)
	tuneProcess(r.log)
	if err := r.preflight(); err != nil {
		return Result{Code: exitcode.Code(err)}, err
	}
	// The report directory is claimed (and proved writable) before
	// anything starts: a run that cannot keep its reports never starts.
	out, err := r.claimOut()
	if err != nil {
		return Result{Code: exitcode.Code(err)}, err
	}
	defer func() {
		if rerr := out.release(); rerr != nil {
			r.log.Warn("could not release the report directory", "err", rerr)
		}
	}()
	res, err := r.drive(ctx)
	// Teardown always: faults first (inside drive's defers), then the rest.
	if terr := r.teardown(); terr != nil && err == nil {
		r.log.Warn("teardown incomplete", "err", terr)
	}
	r.removeSettledJournal(res)
	r.log.Info("run finished", "took", time.Since(start).Round(time.Millisecond), "code", res.Code)
	return res, err
}

// teardown reverts whatever is still applied and stops everything the run
// brought up (idempotent).
func (r *run) teardown() error {
	if r.env == nil {
		return nil
	}
	return errors.Join(r.revertStack(), r.env.close(r.log))
}

func (r *run) revertStack() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return r.stack.RevertAll(ctx)
}

// verify reads the proxies back and the journal, and lists what of this run
// is still in effect.
func (r *run) verify() ([]inject.Leftover, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return inject.VerifyRun(ctx, r.env.toxiproxy, r.id, r.journal)
}

// drive brings the system up, runs the timeline and judges. Faults are
// reverted and verified before it returns, on every path.
func (r *run) drive(ctx context.Context) (Result, error) {
	if err := r.bringUp(ctx); err != nil {
		return Result{Code: exitcode.Code(err)}, err
	}
	if err := r.waitReady(ctx); err != nil {
		return r.finishEarly(err)
	}
	tl, err := r.newTimeline()
	if err != nil {
		return r.finishEarly(err)
	}
	if err := tl.checkOnPath(ctx); err != nil {
		return r.finishEarly(err)
	}

	obsCtx, stopObs := context.WithCancel(context.Background())
	var stopObservers func()
	cpuuse.Do(obsCtx, cpuuse.PartObservers, func(obsCtx context.Context) {
		stopObservers, err = observe.Start(obsCtx, r.sc.Observers, r.observeDeps(), r.clock, r.evlog, r.log.With("component", "observe"))
	})
	if err != nil {
		stopObs()
		return r.finishEarly(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start observers: %w", err)))
	}

	// t=0: load starts now. Bring-up events get negative offsets. Load
	// workers share a t=0 fixed in advance: their Job is created now and
	// t=0 comes once its pods have had the start margin to get ready.
	var moved time.Duration
	if tl.workers != nil {
		if err := tl.workers.begin(ctx); err != nil {
			stopObservers()
			stopObs()
			return r.finishEarly(err)
		}
		moved = r.clock.RezeroAt(tl.workers.start)
	} else {
		moved = r.clock.Rezero()
	}
	r.evlog.Shift(-moved)
	// The journal's header first: a run killed from here on leaves its
	// scenario, plan, events and measured seconds for drill report.
	if err := tl.journal.start(r.outDir(), r.journalHead(), r.evlog); err != nil {
		stopObservers()
		stopObs()
		return r.finishEarly(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start the run journal: %w", err)))
	}
	r.evlog.Emit(event.Event{At: 0, Kind: event.PhaseStart, Source: "run", Detail: "load-start"})

	sampler := r.startCPU(ctx)
	stoppedAt, runErr := tl.execute(ctx)
	if sampler != nil {
		r.cpu = sampler.Stop()
	}
	// load-end marks where the timeline stopped: at or after its duration
	// when it ran its full length, earlier when it was cut short (windows
	// ending after it are not judged).
	r.evlog.Emit(event.Event{At: stoppedAt, Kind: event.PhaseStart, Source: "run", Detail: assert.LoadEndDetail})

	// Load has stopped (execute waited for it); now faults off (anything
	// still on), then verify nothing of ours remains. Services stop last,
	// in teardown.
	cleanupErr := tl.revertAll()
	leftovers, verifyErr := r.verify()
	stopObservers()
	stopObs()

	return r.finish(tl, runErr, cleanupErr, leftovers, verifyErr)
}
