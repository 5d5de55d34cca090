package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
)

// timeline runs the load, the faults and the stop conditions.
type timeline struct {
	r *run
	// engine drives the load: the load engine in this process, or the
	// load workers (workers is then set too).
	engine  loadDriver
	workers *workersLoad
	// workersInvalid is why the load workers' measurement is invalid (a
	// worker failed, started late or stopped reporting), nil otherwise.
	workersInvalid error
	faults         *faultScheduler
	// streams are the scenario's streams with ${...} expanded.
	streams []scenario.Stream
	// warm builds each stream's warm-traffic requests (nil: the stream
	// has no inline target).
	warm []*load.Requests
	// journal receives the engine's closed seconds and the run's events.
	journal runJournal
	// live keeps the window-judged assertions' streams merged over their
	// windows for the console's provisional verdicts (nil without a
	// console, or when no assertion needs it).
	live *control.Windows
	// aborted is set when a stop condition aborts or a signal ended the run.
	abortMu sync.Mutex
	aborted error
}

func (r *run) newTimeline() (*timeline, error) {
	procs, ctrs := r.processTargets()
	pods := make(map[string]inject.PodSet, len(r.env.services))
	for name, svc := range r.env.services {
		pods[name] = svc
	}
	ienv := &inject.Env{
		Toxiproxy:  r.env.toxiproxy,
		RunID:      r.id,
		Journal:    r.journal,
		Processes:  procs,
		Containers: ctrs,
		Services:   pods,
		Log:        r.log.With("component", "inject"),
	}
	if r.kube != nil {
		sel := map[string]string{}
		for _, s := range r.sc.Services {
			if s.Selector != "" {
				sel[s.Name] = s.Selector
			}
		}
		ienv.Kube = &inject.KubeEnv{
			Client: r.kube.clientset, Namespace: r.kube.cfg.Namespace, Selectors: sel,
			Kubeconfig: r.opts.Kubeconfig, Context: r.kube.cfg.Context,
			Events: r.evlog, Now: r.clock.Now,
		}
	}
	if cr := r.env.compose; cr != nil && cr.stack != nil {
		// pod-kill and rollout of a Compose service stop its container
		// and start it again; the watcher reports what the engine does.
		ienv.Compose = &inject.ComposeEnv{Stack: cr.stack, Events: r.evlog, Now: r.clock.Now}
	}
	tl := &timeline{r: r}
	tl.faults = newFaultScheduler(runClock(r.clock), r.log, r.evlog, r.stack, tl.abort)
	for _, f := range r.sc.Faults {
		inj, err := inject.Build(f, ienv)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("fault %s: %w", f.Name, err))
		}
		tl.faults.add(f, inj)
	}
	streams, err := load.ExpandStreams(r.sc.Streams, r.vars)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, err)
	}
	for i := range streams {
		if streams[i].Duration.D() == 0 {
			streams[i].Duration = scenario.Duration{Duration: r.plan.Duration - streams[i].Start.D()}
		}
	}
	// Load aimed at a local Service is routed as kube-proxy routes a
	// client's connection in the kernel: the generator's own request goes
	// straight to a ready endpoint the Service picks (same endpoints, same
	// answers), with no proxy hop in between. The exchange is the
	// generator's work (its pprof label); only the pick is the Service's.
	routers := make(map[string]load.Router, len(r.env.services))
	for _, svc := range r.env.services {
		routers[svc.Addr()] = svc
	}
	eng, err := load.New(r.clock, streams, load.Options{Dir: filepath.Dir(r.sc.File), RunID: r.id, Routers: routers, Seconds: &tl.journal, OnLate: r.opts.OnLate}, r.log.With("component", "load"))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("prepare load: %w", err))
	}
	tl.engine = eng
	tl.streams = streams
	if r.sc.Load != nil && r.sc.Load.Workers > 0 {
		// The engine above checked the streams' requests; the workers
		// build their own from the same streams.
		wl, err := newWorkersLoad(r, streams, &tl.journal, r.opts.WorkersStartMargin)
		if err != nil {
			return nil, err
		}
		tl.engine, tl.workers = wl, wl
	}
	if r.opts.OnLive != nil {
		if tl.live = control.NewWindows(r.sc, r.plan, r.evlog.Events()); tl.live != nil {
			tl.journal.tap = tl.live.Add
		}
	}
	// The warm traffic's requests, built as the engine builds its own (the
	// engine has checked them: this does not fail where it did not).
	tl.warm = make([]*load.Requests, len(streams))
	for i, st := range streams {
		if len(st.Targets) == 0 {
			continue // warm traffic uses inline targets only
		}
		if tl.warm[i], err = load.NewRequests(st, filepath.Dir(r.sc.File)); err != nil {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("prepare load: stream %q: %w", st.Name, err))
		}
	}
	return tl, nil
}

// execute runs the timeline: the load and the fault schedule, for the
// plan's whole duration whether or not load runs (a scenario without
// streams, or whose load a stop condition ended, still runs its windows),
// until ctx ends (graceful stop) or a stop condition aborts. It returns
// once load has stopped and every request in flight has ended, with the
// clock offset at which the timeline stopped: at or after the plan's
// duration when it ran its full length, else the moment it was cut short.
func (tl *timeline) execute(ctx context.Context) (time.Duration, error) {
	r := tl.r
	tlCtx, stopTimeline := context.WithCancel(ctx)
	defer stopTimeline()
	loadCtx, stopLoad := context.WithCancel(tlCtx)
	defer stopLoad()
	stopped := make(chan time.Duration, 1)
	go func() {
		<-tlCtx.Done()
		stopped <- r.clock.Now()
	}()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Faults switched on here start the embedded Toxiproxy's toxic
		// goroutines, which keep this label.
		cpuuse.Do(tlCtx, cpuuse.PartToxiproxy, func(ctx context.Context) { tl.faults.run(ctx, r.plan.Actions) })
	}()
	stops := &stopWatcher{
		clock: runClock(r.clock), log: r.log, evlog: r.evlog, conds: r.sc.StopConditions,
		live:   func() []load.StreamLive { return tl.engine.Live(time.Second) },
		faults: tl.faults, stopLoad: stopLoad, stopTimeline: stopTimeline, abort: tl.abort,
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		cpuuse.Do(tlCtx, cpuuse.PartObservers, stops.run)
	}()
	tl.goLive(tlCtx, stopLoad, stopTimeline)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tl.progress(tlCtx)
	}()

	var err error
	cpuuse.Do(loadCtx, cpuuse.PartGenerator, func(ctx context.Context) { err = tl.engine.Run(ctx) })
	if errors.Is(err, workers.ErrWorkerFailed) {
		// The workers' Job is gone, so is the load: the measurement is
		// invalid (exit 4), and the timeline ends here.
		tl.workersInvalid, err = err, nil
		r.log.Error("a load worker failed: the run is invalid; ending the timeline", "err", tl.workersInvalid)
		stopTimeline()
	}
	if wait := r.plan.Duration - r.clock.Now(); wait > 0 && tlCtx.Err() == nil {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-tlCtx.Done():
			t.Stop()
		}
	}
	stopTimeline()
	at := <-stopped
	wg.Wait()
	<-progressDone
	if cause := tl.abortCause(); cause != nil {
		return at, cause
	}
	if ctx.Err() != nil {
		return at, exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("run interrupted at t+%s: %w", at.Round(time.Millisecond), context.Cause(ctx)))
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return at, exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("load: %w", err))
	}
	return at, nil
}

func (tl *timeline) abortCause() error {
	tl.abortMu.Lock()
	defer tl.abortMu.Unlock()
	return tl.aborted
}

func (tl *timeline) abort(err error) {
	tl.abortMu.Lock()
	if tl.aborted == nil {
		tl.aborted = err
	}
	tl.abortMu.Unlock()
}

// revertAll reverts every fault still on (emitting fault-off events), then
// everything else on the stack (proxies this run created).
func (tl *timeline) revertAll() error {
	tl.faults.endAll("end of run")
	return tl.r.revertStack()
}
