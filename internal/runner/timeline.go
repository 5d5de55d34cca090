package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/observe"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// faultState tracks one scheduled fault.
type faultState struct {
	spec     scenario.Fault
	injector inject.Injector
	mu       sync.Mutex
	revert   inject.Revert
	on, done bool
	// ctl is the operator's hold on the fault (control.go).
	ctl faultControl
}

// timeline runs the load, the faults and the stop conditions.
type timeline struct {
	r      *run
	engine *load.Engine
	faults map[string]*faultState
	order  []string
	// streams are the scenario's streams with ${...} expanded.
	streams []scenario.Stream
	// journal receives the engine's closed seconds and the run's events.
	journal runJournal
	// aborted is set when a stop condition aborts or a signal ended the run.
	abortMu sync.Mutex
	aborted error
}

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

	// t=0: load starts now. Bring-up events get negative offsets.
	moved := r.clock.Rezero()
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

func (r *run) newTimeline() (*timeline, error) {
	procs, ctrs := r.processTargets()
	ienv := &inject.Env{
		Toxiproxy:  r.env.toxiproxy,
		RunID:      r.id,
		Journal:    r.journal,
		Processes:  procs,
		Containers: ctrs,
		Log:        r.log.With("component", "inject"),
	}
	tl := &timeline{r: r, faults: map[string]*faultState{}}
	var err error
	for _, f := range r.sc.Faults {
		inj, err := inject.Build(f, ienv)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("fault %s: %w", f.Name, err))
		}
		tl.faults[f.Name] = &faultState{spec: f, injector: inj}
		tl.order = append(tl.order, f.Name)
	}
	streams := make([]scenario.Stream, len(r.sc.Streams))
	for i, s := range r.sc.Streams {
		s.Targets = append([]scenario.Target(nil), s.Targets...)
		for j := range s.Targets {
			t := &s.Targets[j]
			if t.URL, err = r.expand(fmt.Sprintf("streams[%d].targets[%d].url", i, j), t.URL); err != nil {
				return nil, err
			}
			hs := make(map[string]string, len(t.Headers))
			for k, v := range t.Headers {
				if hs[k], err = r.expand(fmt.Sprintf("streams[%d].targets[%d].headers.%s", i, j, k), v); err != nil {
					return nil, err
				}
			}
			t.Headers = hs
			if t.Body, err = r.expand(fmt.Sprintf("streams[%d].targets[%d].body", i, j), t.Body); err != nil {
				return nil, err
			}
		}
		if s.BasicAuth != nil {
			ba := *s.BasicAuth
			if ba.Username, err = r.expand(fmt.Sprintf("streams[%d].basicAuth.username", i), ba.Username); err != nil {
				return nil, err
			}
			if ba.Password, err = r.expand(fmt.Sprintf("streams[%d].basicAuth.password", i), ba.Password); err != nil {
				return nil, err
			}
			s.BasicAuth = &ba
		}
		if s.Duration.D() == 0 {
			s.Duration = scenario.Duration{Duration: r.plan.Duration - s.Start.D()}
		}
		streams[i] = s
	}
	// Load aimed at a local Service is routed in-process by that Service
	// (same endpoints, same answers), sparing the CPU of a loopback HTTP
	// hop that kube-proxy would do in the kernel.
	routers := make(map[string]load.Router, len(r.env.services))
	for _, svc := range r.env.services {
		routers[svc.Addr()] = svc
	}
	eng, err := load.New(r.clock, streams, load.Options{Dir: filepath.Dir(r.sc.File), RunID: r.id, Routers: labelRouters(routers), Seconds: &tl.journal}, r.log.With("component", "load"))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("prepare load: %w", err))
	}
	tl.engine = eng
	tl.streams = streams
	return tl, nil
}

// checkOnPath proves, before the drill proper, that traffic flows through
// every proxy a fault will use (exit 4 otherwise).
func (tl *timeline) checkOnPath(ctx context.Context) error {
	seen := map[string]bool{}
	for _, name := range tl.order {
		f := tl.faults[name].spec
		if f.Proxy == "" || seen[f.Proxy] {
			continue
		}
		seen[f.Proxy] = true
		// Counters first; when they do not move (a remote Toxiproxy counts
		// pooled connections only at close) or are missing, a canary
		// latency toxic named drill-<run>-canary decides (DESIGN 7a).
		err := inject.CheckOnPath(ctx, tl.r.env.toxiproxy, f.Proxy, tl.timedWarmTraffic, inject.OnPathOptions{
			RunID: tl.r.id, Journal: tl.r.journal, Log: tl.r.log.With("component", "inject"),
		})
		if errors.Is(err, inject.ErrNotOnPath) {
			return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("fault %s would miss the traffic: %w", f.Name, err))
		}
		if err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("check that fault %s is on the traffic path: %w", f.Name, err))
		}
		tl.r.log.Info("fault is on the traffic path", "fault", f.Name, "proxy", f.Proxy)
	}
	return nil
}

// timedWarmTraffic is warmTraffic timed: the total time of its requests,
// which the on-path canary compares without and with its latency.
func (tl *timeline) timedWarmTraffic(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := tl.warmTraffic(ctx)
	return time.Since(start), err
}

// warmTraffic sends a few requests of every stream's first target, as the
// load engine would send them (${...} expanded, basicAuth applied).
func (tl *timeline) warmTraffic(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var errs []error
	for i := 0; i < 5; i++ {
		for si, s := range tl.streams {
			if len(s.Targets) == 0 {
				continue
			}
			t := s.Targets[0]
			url := t.URL
			// The same template data the load engine renders (load.BodyData).
			tpl, err := template.New("body").Parse(t.Body)
			if err != nil {
				return fmt.Errorf("streams[%d] body template: %w", si, err)
			}
			var buf strings.Builder
			data := load.BodyData{ID: fmt.Sprintf("%s-warm-%d-%d", tl.r.id, si, i), Time: time.Now().UTC().Format(time.RFC3339Nano)}
			if err := tpl.Execute(&buf, data); err != nil {
				return fmt.Errorf("streams[%d] body template: %w", si, err)
			}
			body := buf.String()
			method := t.Method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
			if err != nil {
				return err
			}
			for k, v := range t.Headers {
				req.Header.Set(k, v)
			}
			if ba := s.BasicAuth; ba != nil {
				req.SetBasicAuth(ba.Username, ba.Password)
			}
			resp, err := client.Do(req)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	if len(errs) > 0 && len(errs) == 5*len(tl.streams) {
		return errors.Join(errs...)
	}
	return nil
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
		cpuuse.Do(tlCtx, cpuuse.PartToxiproxy, tl.schedule)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		cpuuse.Do(tlCtx, cpuuse.PartObservers, func(ctx context.Context) { tl.watchStops(ctx, stopLoad, stopTimeline) })
	}()
	tl.goLive(tlCtx, stopLoad, stopTimeline)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tl.progress(tlCtx)
	}()

	var err error
	cpuuse.Do(loadCtx, cpuuse.PartGenerator, func(ctx context.Context) { err = tl.engine.Run(ctx) })
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

// schedule turns faults on and off at the plan's times.
func (tl *timeline) schedule(ctx context.Context) {
	r := tl.r
	for _, a := range r.plan.Actions {
		if a.Kind != plan.FaultOn && a.Kind != plan.FaultOff {
			continue
		}
		wait := a.At - r.clock.Now()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		fs := tl.faults[a.Target]
		if fs == nil {
			continue
		}
		if a.Kind == plan.FaultOn {
			tl.turnOn(ctx, fs)
		} else {
			tl.turnOff(fs, "scheduled")
		}
	}
}

func (tl *timeline) turnOn(ctx context.Context, fs *faultState) {
	r := tl.r
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.on || fs.done {
		return
	}
	revert, err := fs.injector.Inject(ctx)
	at := r.clock.Now()
	if err != nil {
		r.log.Error("fault could not be applied", "fault", fs.spec.Name, "err", err)
		r.evlog.Emit(event.Event{At: at, Kind: event.FaultError, Source: "run", Fault: fs.spec.Name, Detail: err.Error()})
		tl.abort(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("apply fault %s: %w", fs.spec.Name, err)))
		fs.done = true
		if revert != nil {
			r.stack.Push("fault "+fs.spec.Name, revert)
		}
		return
	}
	fs.revert = r.stack.Push("fault "+fs.spec.Name, revert)
	fs.on = true
	fs.ctl.markOn(at)
	r.log.Info("fault on", "fault", fs.spec.Name, "type", fs.spec.Type, "t", at.Round(time.Millisecond))
	r.evlog.Emit(event.Event{At: at, Kind: event.FaultOn, Source: "run", Fault: fs.spec.Name, Detail: string(fs.spec.Type)})
}

func (tl *timeline) turnOff(fs *faultState, why string) {
	r := tl.r
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.on || fs.done || tl.keepHeld(fs, why) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := fs.revert(ctx)
	at := r.clock.Now()
	fs.on, fs.done = false, true
	fs.ctl.markOff(at)
	if err != nil {
		r.log.Error("fault could not be reverted", "fault", fs.spec.Name, "err", err)
		r.evlog.Emit(event.Event{At: at, Kind: event.FaultError, Source: "run", Fault: fs.spec.Name, Detail: "revert: " + err.Error()})
		return
	}
	r.log.Info("fault off", "fault", fs.spec.Name, "why", why, "t", at.Round(time.Millisecond))
	r.evlog.Emit(event.Event{At: at, Kind: event.FaultOff, Source: "run", Fault: fs.spec.Name, Detail: why})
}

// endFaults reverts every fault that is on now (stop condition end-faults).
func (tl *timeline) endFaults(why string) {
	for _, name := range tl.order {
		fs := tl.faults[name]
		tl.turnOff(fs, why)
		fs.mu.Lock()
		fs.done = true // a fault ended early does not come back
		fs.mu.Unlock()
	}
}

// revertAll reverts every fault still on (emitting fault-off events), then
// everything else on the stack (proxies this run created).
func (tl *timeline) revertAll() error {
	tl.endFaults("end of run")
	return tl.r.revertStack()
}

// watchStops evaluates stop conditions once a second. stopLoad ends the
// load alone (the timeline runs on); stopTimeline ends the whole timeline.
func (tl *timeline) watchStops(ctx context.Context, stopLoad, stopTimeline context.CancelFunc) {
	r := tl.r
	if len(r.sc.StopConditions) == 0 {
		return
	}
	since := make([]time.Duration, len(r.sc.StopConditions))
	fired := make([]bool, len(r.sc.StopConditions))
	for i := range since {
		since[i] = -1
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		live := map[string]load.StreamLive{}
		for _, l := range tl.engine.Live(time.Second) {
			live[l.Stream] = l
		}
		now := r.clock.Now()
		for i, sc := range r.sc.StopConditions {
			if fired[i] {
				continue
			}
			l, ok := live[sc.Stream]
			if !ok || l.ErrorRate <= sc.ErrorRateAbove {
				since[i] = -1
				continue
			}
			if since[i] < 0 {
				since[i] = now
			}
			if now-since[i] < sc.For.D() {
				continue
			}
			fired[i] = true
			action := sc.Action
			if action == "" {
				action = scenario.StopEndFaults
			}
			detail := fmt.Sprintf("%s: %s error rate %.1f%% above %.1f%% for %s; action %s", sc.Name, sc.Stream, 100*l.ErrorRate, 100*sc.ErrorRateAbove, sc.For.D(), action)
			r.log.Warn("stop condition fired", "detail", detail)
			r.evlog.Emit(event.Event{At: now, Kind: event.StopFired, Source: "run", Detail: detail})
			switch action {
			case scenario.StopEndFaults:
				tl.endFaults("stop condition " + sc.Name)
			case scenario.StopLoad:
				tl.endFaults("stop condition " + sc.Name)
				stopLoad()
			case scenario.StopAbort:
				tl.endFaults("stop condition " + sc.Name)
				tl.abort(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("aborted by stop condition %s", detail)))
				stopTimeline()
			}
		}
	}
}
