package compose

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/event"
)

// Source is the event source of what the engine reports about a compose
// run's containers.
const Source = "docker"

// pollEvery is how often the watcher inspects every container besides the
// engine's events (a missed event costs at most this much).
const pollEvery = 500 * time.Millisecond

// Watcher turns the engine's view of a stack's containers into run events
// of the kinds the local runtime produces, on the run's clock:
//
//   - every healthcheck result (the engine's health log) -> ProbeResult
//     (Probe healthcheck, OK exit 0, Detail its output, Value seconds taken),
//     at the check's end;
//   - health status healthy -> PodReady; unhealthy -> PodUnready with
//     Reason "unhealthy" and Detail the failing streak and last outputs; a
//     container that stopped running -> PodUnready (Reason "exited");
//     without a healthcheck, running is ready;
//   - a new start -> PodStarted; RestartCount rising -> ContainerRestart
//     (Reason the exit code and restart policy, Logs the last health
//     outputs).
//
// A container is serving (what Traefik's Docker provider routes to) while
// it runs and is healthy or has no healthcheck; OnServing hears every
// change.
type Watcher struct {
	cli   Docker
	st    *Stack
	clock *event.Clock
	sink  event.Sink
	log   *slog.Logger
	// onServing is called from the watcher's goroutine.
	onServing func(c *Container, serving bool)

	mu    sync.Mutex
	state map[string]*ctrState
	done  chan struct{}
}

type ctrState struct {
	seen      bool
	running   bool
	startedAt string
	restarts  int
	health    container.HealthStatus
	lastCheck time.Time
	serving   bool
}

// Watch starts watching st's containers until ctx ends; [Watcher.Wait]
// waits for the watcher to stop. onServing may be nil.
func Watch(ctx context.Context, cli Docker, st *Stack, clock *event.Clock, sink event.Sink, onServing func(*Container, bool), log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cli: cli, st: st, clock: clock, sink: sink, log: log, onServing: onServing,
		state: map[string]*ctrState{}, done: make(chan struct{})}
	for _, c := range st.Containers {
		w.state[c.ID] = &ctrState{}
	}
	// The first look happens before Watch returns, so a caller sees the
	// state at once.
	for _, c := range st.Containers {
		w.inspect(ctx, c)
	}
	go w.loop(ctx)
	return w
}

// Wait blocks until the watcher stopped (its context ended).
func (w *Watcher) Wait() { <-w.done }

// Serving reports whether service's container is serving now.
func (w *Watcher) Serving(service string) bool {
	c := w.st.container(service)
	if c == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.state[c.ID]
	return s != nil && s.serving
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	f := client.Filters{}.Add("label", LabelRun+"="+w.st.run).Add("type", "container")
	evs := w.cli.Events(ctx, client.EventsListOptions{Filters: f})
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-evs.Messages:
			if !ok {
				evs.Messages = nil
				continue
			}
			for _, c := range w.st.Containers {
				if c.ID == m.Actor.ID {
					w.inspect(ctx, c)
				}
			}
		case err, ok := <-evs.Err:
			if !ok {
				evs.Err = nil
				continue
			}
			if ctx.Err() == nil {
				w.log.Warn("docker event stream ended; polling only", "err", err)
			}
			evs.Err = nil
		case <-t.C:
			for _, c := range w.st.Containers {
				w.inspect(ctx, c)
			}
		}
	}
}

func (w *Watcher) emit(at time.Duration, c *Container, e event.Event) {
	e.At, e.Source, e.Service, e.Pod, e.Container = at, Source, c.Service, c.Name, c.Service
	w.sink.Emit(e)
}

// at converts an engine time (wall clock) to the run's clock; a zero time
// is now.
func (w *Watcher) at(t time.Time) time.Duration {
	if t.IsZero() {
		return w.clock.Now()
	}
	return w.clock.Offset(t)
}

func (w *Watcher) inspect(ctx context.Context, c *Container) {
	in, err := w.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Debug("inspect failed", "container", c.Name, "err", err)
		}
		return
	}
	s := in.Container.State
	if s == nil {
		return
	}
	changed, serving := w.update(c, in.Container)
	if changed && w.onServing != nil {
		w.onServing(c, serving)
	}
}

// update diffs the inspected state against the last one and emits the
// events; it reports whether serving changed.
func (w *Watcher) update(c *Container, in container.InspectResponse) (changed, serving bool) {
	s := in.State
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state[c.ID]
	if st == nil {
		st = &ctrState{}
		w.state[c.ID] = st
	}
	// Health checks the engine ran since the last look.
	var newest *container.HealthcheckResult
	if s.Health != nil {
		for _, r := range s.Health.Log {
			if r == nil || !r.Start.After(st.lastCheck) {
				continue
			}
			st.lastCheck = r.Start
			newest = r
			w.emit(w.at(r.End), c, event.Event{Kind: event.ProbeResult, Probe: event.ProbeHealthcheck,
				OK: r.ExitCode == 0, Detail: strings.TrimSpace(r.Output), Value: r.End.Sub(r.Start).Seconds()})
		}
	}
	checkAt := w.clock.Now()
	if newest != nil {
		checkAt = w.at(newest.End)
	}
	started, _ := time.Parse(time.RFC3339Nano, s.StartedAt)
	if s.StartedAt != st.startedAt && s.Running {
		if st.seen && in.RestartCount > st.restarts {
			finished, _ := time.Parse(time.RFC3339Nano, s.FinishedAt)
			var logs []string
			if s.Health != nil {
				logs = []string{lastOutputs(s.Health, 3)}
			}
			if st.running {
				// It exited and was restarted between two looks.
				w.emit(w.at(finished), c, event.Event{Kind: event.PodUnready, Reason: "exited",
					Detail: fmt.Sprintf("exit code %d", s.ExitCode)})
				// Ready again only from the new start's state on (a
				// container without a healthcheck: at once, below).
				st.serving = false
			}
			w.emit(w.at(finished), c, event.Event{Kind: event.ContainerRestart, RestartCount: int32(in.RestartCount),
				Reason: fmt.Sprintf("exited (code %d), restarted by the engine's restart policy", s.ExitCode), Logs: logs})
		}
		w.emit(w.at(started), c, event.Event{Kind: event.PodStarted, RestartCount: int32(in.RestartCount),
			Detail: fmt.Sprintf("pid %d", s.Pid)})
		st.startedAt = s.StartedAt
		st.restarts = in.RestartCount
		st.health = ""
	}
	if st.running && !s.Running {
		finished, _ := time.Parse(time.RFC3339Nano, s.FinishedAt)
		w.emit(w.at(finished), c, event.Event{Kind: event.PodUnready, Reason: "exited",
			Detail: fmt.Sprintf("exit code %d", s.ExitCode)})
	}
	st.running = s.Running
	st.seen = true
	if s.Running && s.Health != nil && s.Health.Status != st.health {
		switch s.Health.Status {
		case container.Healthy:
			w.emit(checkAt, c, event.Event{Kind: event.PodReady, Detail: "health status healthy"})
		case container.Unhealthy:
			detail := fmt.Sprintf("failing streak %d: %s", s.Health.FailingStreak, lastOutputs(s.Health, 3))
			if s.Paused {
				// The engine stops the health monitor of a paused container
				// and reports it unhealthy.
				detail = "container paused; " + detail
			}
			w.emit(checkAt, c, event.Event{Kind: event.PodUnready, Reason: "unhealthy", Detail: detail})
		}
		st.health = s.Health.Status
	}
	serving = s.Running && (s.Health == nil || s.Health.Status == container.Healthy)
	if s.Running && s.Health == nil && !st.serving {
		w.emit(w.at(started), c, event.Event{Kind: event.PodReady, Detail: "running (no healthcheck)"})
	}
	changed = serving != st.serving
	st.serving = serving
	return changed, serving
}
