package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
)

// loadDriver drives a run's streams: the load engine in this process, or
// the load workers' coordinator ([workersLoad]) for a scenario with
// load.workers. Both hand every closed second to the run journal.
type loadDriver interface {
	// Run drives the load until its schedule ends or ctx ends.
	Run(ctx context.Context) error
	// Live is each stream's recent figures (progress, stop conditions,
	// console).
	Live(window time.Duration) []load.StreamLive
	// Series is each stream's seconds held in memory (the fallback when
	// the journal failed).
	Series() map[string]*measure.Series
	// SecondsErr is the first error handing a second to the journal.
	SecondsErr() error
}

// liveSeconds is how many merged seconds per stream a workers run keeps
// for its progress line and stop conditions.
const liveSeconds = 10

// workersLoad is a drill run's load spread over the worker pods of one
// Indexed Job: the coordinator creates the Job before t=0 ([workersLoad.begin]),
// the run's clock starts at the workers' shared t=0, and every merged
// second goes to the run journal, so assertions, findings, reports and
// the console read the same series one process produces.
type workersLoad struct {
	coord   *workers.Coordinator
	streams []scenario.Stream
	clock   *event.Clock
	out     load.SecondSink
	// start is t=0 with a monotonic reading; the Job's spec carries it
	// as UTC wall time.
	start time.Time

	mu      sync.Mutex
	recent  map[string][]*measure.Bucket // the last liveSeconds merged seconds per stream
	sent    map[string]int64             // completed requests so far per stream
	late    map[string]int64             // late requests so far per stream
	sinkErr error

	cancel context.CancelFunc
	done   chan struct{}
	res    workers.Result
	err    error
}

// newWorkersLoad prepares a run's load on the scenario's load.workers
// worker pods in the run's namespace, t=0 margin (0: the default) from
// now. The merged seconds go to out (the run journal); the run's state
// directory journals the Job for drill cleanup. Errors: the run is not a
// kubernetes run (exit 2), the journal cannot be opened (exit 3).
func newWorkersLoad(r *run, streams []scenario.Stream, out load.SecondSink, margin time.Duration) (*workersLoad, error) {
	if r.kube == nil {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: load.workers: only a kubernetes scenario can run its load on workers", r.sc.File))
	}
	if margin <= 0 {
		margin = DefaultWorkersStartMargin
	}
	start := time.Now().Add(margin)
	spec := workers.Spec{RunID: r.id, Workers: r.sc.Load.Workers, Start: start.UTC(), Streams: streams}
	wl := &workersLoad{
		streams: streams, clock: r.clock, out: out, start: start,
		recent: map[string][]*measure.Bucket{}, sent: map[string]int64{}, late: map[string]int64{},
	}
	var journal *workers.Journal
	if r.opts.StateDir != "" {
		var err error
		if journal, err = workers.OpenJournal(r.opts.StateDir, r.id, r.opts.Kubeconfig, r.kube.cfg.Context); err != nil {
			return nil, exitcode.Wrap(exitcode.CouldNotRun, err)
		}
	}
	wl.coord = &workers.Coordinator{
		Client:  r.kube.clientset,
		Job:     workers.JobOptions{Namespace: r.kube.cfg.Namespace, Image: r.sc.Load.Image, Spec: spec},
		Sink:    wl,
		Journal: journal,
		Log:     r.log.With("component", "workers"),

		MaxStartLate: r.opts.WorkersMaxStartLate,
	}
	return wl, nil
}

// WriteSecond implements load.SecondSink: it keeps the second for Live
// and hands it to the run journal.
func (wl *workersLoad) WriteSecond(stream string, b *measure.Bucket) error {
	wl.mu.Lock()
	keep := append(wl.recent[stream], b.Clone())
	if len(keep) > liveSeconds {
		keep = keep[len(keep)-liveSeconds:]
	}
	wl.recent[stream] = keep
	wl.sent[stream] += b.Requests
	wl.late[stream] += b.Late
	wl.mu.Unlock()
	err := wl.out.WriteSecond(stream, b)
	if err != nil {
		wl.mu.Lock()
		if wl.sinkErr == nil {
			wl.sinkErr = err
		}
		wl.mu.Unlock()
	}
	return err
}

// begin creates the workers' Job and returns at t=0, once the shared
// start time has come. Errors: the Job could not be created or a worker
// failed before t=0 (the Job is deleted before begin returns), or ctx
// ended while waiting (likewise).
func (wl *workersLoad) begin(ctx context.Context) error {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wl.cancel, wl.done = cancel, make(chan struct{})
	go func() {
		defer close(wl.done)
		wl.res, wl.err = wl.coord.Run(cctx)
	}()
	t := time.NewTimer(time.Until(wl.start))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wl.done:
		if wl.err == nil {
			wl.err = errors.New("the workers finished before t=0")
		}
		return wl.failure(wl.err)
	case <-ctx.Done():
		cancel()
		<-wl.done
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("interrupted waiting for the load workers' t=0: %w", context.Cause(ctx)))
	}
}

// failure maps a coordinator error to the run's exit code: a worker that
// failed makes the measurement invalid (4), anything else is could not
// run (3), bad input stays 2.
func (wl *workersLoad) failure(err error) error {
	if c := exitcode.Code(err); c == exitcode.InvalidMeasurement || c == exitcode.BadInput {
		return err
	}
	return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("load workers: %w", err))
}

// Run waits for the workers to finish their schedules. When ctx ends
// first (stop load, Ctrl-C, an abort) the Job is deleted and Run returns
// ctx's error once the coordinator has returned. A worker's failure
// comes back wrapping workers.ErrWorkerFailed.
func (wl *workersLoad) Run(ctx context.Context) error {
	select {
	case <-wl.done:
	case <-ctx.Done():
		wl.cancel()
		<-wl.done
		if wl.err != nil && !errors.Is(wl.err, workers.ErrWorkerFailed) {
			return fmt.Errorf("load workers: %w", ctx.Err())
		}
	}
	if wl.err != nil {
		return wl.failure(wl.err)
	}
	return nil
}

// Live returns each stream's figures over its last merged seconds (up to
// window, rounded up to whole seconds). Merged seconds arrive once every
// worker has reported them, some seconds behind the run's clock, so the
// figures trail it by that much; InFlight and Behind are not known here
// (0).
func (wl *workersLoad) Live(window time.Duration) []load.StreamLive {
	n := max(int((window+time.Second-1)/time.Second), 1)
	now := wl.clock.Now()
	wl.mu.Lock()
	defer wl.mu.Unlock()
	out := make([]load.StreamLive, 0, len(wl.streams))
	for _, st := range wl.streams {
		l := load.StreamLive{Stream: st.Name, State: "running", Sent: wl.sent[st.Name], Late: wl.late[st.Name]}
		switch {
		case now < st.Start.D():
			l.State = "pending"
		case now >= st.Start.D()+streamLength(st):
			l.State = "done"
		}
		rec := wl.recent[st.Name]
		if len(rec) > n {
			rec = rec[len(rec)-n:]
		}
		if len(rec) > 0 {
			b := measure.NewBucket(rec[0].Start, 0)
			var intended int64
			for _, s := range rec {
				b.Merge(s)
				intended += s.Intended
			}
			l.Window = time.Duration(len(rec)) * time.Second
			l.Requests, l.Failures, l.ErrorRate = b.Requests, b.Failures(), b.ErrorRate()
			l.P50, l.P99 = b.Quantile(50), b.Quantile(99)
			l.LagP99 = measure.Quantile(b.Lag, 99)
			l.Shed = b.ShedCount()
			l.AchievedRate = float64(l.Requests) / l.Window.Seconds()
			l.IntendedRate = float64(intended) / l.Window.Seconds()
		}
		out = append(out, l)
	}
	return out
}

// streamLength is how long a stream's schedule lasts: its duration, or
// its steps' sum.
func streamLength(st scenario.Stream) time.Duration {
	if d := st.Duration.D(); d > 0 {
		return d
	}
	var d time.Duration
	for _, s := range st.Steps {
		d += s.For.D()
	}
	return d
}

// Series returns nothing: a workers run keeps its seconds in the run
// journal only.
func (wl *workersLoad) Series() map[string]*measure.Series { return map[string]*measure.Series{} }

// SecondsErr is the first error the run journal returned for a merged
// second.
func (wl *workersLoad) SecondsErr() error {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	return wl.sinkErr
}

// reports is each worker's account for run.json and the summary (nil
// before the coordinator returned).
func (wl *workersLoad) reports() []record.LoadWorker {
	if wl.done == nil {
		return nil
	}
	select {
	case <-wl.done:
	default:
		return nil
	}
	out := make([]record.LoadWorker, 0, len(wl.res.Workers))
	for _, w := range wl.res.Workers {
		lw := record.LoadWorker{Index: w.Index, Pod: w.Pod, State: record.LoadWorkerDone, Sent: w.Sent, Late: w.LateRequests,
			LagP99: w.LagP99, LagMax: w.LagMax, StartedLate: w.Late, Error: w.Error}
		switch {
		case w.Failed:
			lw.State = record.LoadWorkerFailed
		case !w.Done:
			lw.State = record.LoadWorkerStopped
		}
		if w.Clock != nil {
			lw.Clock = w.Clock.String()
		}
		out = append(out, lw)
	}
	return out
}
