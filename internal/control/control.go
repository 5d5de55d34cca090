// Package control is an operator's hand on a live run, for the game-day
// console (drill run --ui): the run's state now, operator commands (start,
// end, hold and release a fault, stop the load, abort, annotate), each
// recorded as an operator event on the run's clock, and the assertions'
// provisional verdicts on the data so far. A fault is only ever switched
// through the run's fault scheduler ([Faults]); the runner fills in a
// [Run] with what a [Control] reads and commands when the run's timeline
// starts, and hands the console the [Control] ([Start]).
package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// Operator commands refused by a [Control] wrap one of these errors.
var (
	// ErrUnknownFault: the scenario declares no fault of that name.
	ErrUnknownFault = errors.New("no such fault")
	// ErrConflict: the command does not fit the run's or the fault's state
	// now (a fault already ended, a start of a fault that is not manual,
	// the timeline is over, another operator acted first).
	ErrConflict = errors.New("conflict")
	// ErrBadCommand: the command itself is malformed (an empty annotation).
	ErrBadCommand = errors.New("bad command")
)

// maxAnnotation is the longest annotation kept, in bytes.
const maxAnnotation = 2000

// Fault states reported in [FaultLive.State].
const (
	FaultPending = "pending" // scheduled, not on yet
	FaultWaiting = "manual"  // declared at: manual, waits for an operator
	FaultOnState = "on"
	FaultHeld    = "held" // on, and stays on until released
	FaultEnded   = "ended"
)

// Faults is a run's fault scheduler as a [Control] commands it: every
// switch of a fault, and every hold and release, goes through it. Its
// methods are safe for concurrent use. A command that does not apply to
// its fault's state now (no such fault, already on, not on, already held,
// not held) changes nothing and returns an error wrapping [ErrConflict].
type Faults interface {
	// Start switches fault name on now, with why in the logs. Besides a
	// conflict, it returns the error applying the fault (the run then
	// aborts, exit 3).
	Start(ctx context.Context, name, why string) error
	// End switches fault name off for good, held or not, why being the
	// fault-off event's detail; a scheduled end (the fault's for: has
	// run out) leaves a held fault on. Besides a conflict, it returns the
	// error reverting the fault (its revert is retried at the run's end).
	End(name, why string, scheduled bool) error
	// Hold keeps fault name, which is on, from being switched off by its
	// scheduled end; an End that is not scheduled, a stop condition or
	// the end of the run still end it.
	Hold(name, why string) error
	// Release lets held fault name be ended by its schedule again; it
	// does not end it (the caller ends a fault whose end has passed).
	Release(name, why string) error
	// EndAll switches off every fault that is on, held or not, and ends
	// every fault for good, why being the fault-off events' detail.
	EndAll(why string)
	// Status returns each fault's state now, in scenario order.
	Status() []FaultStatus
}

// FaultStatus is one fault's state as the fault scheduler holds it.
type FaultStatus struct {
	// Spec is the fault as the scenario declares it.
	Spec scenario.Fault
	// On: applied now; Held: on and held past its scheduled end; Done:
	// ended for good (or failed to apply).
	On, Held, Done bool
	// OnAt and OffAt are when it went on and off on the run's clock; -1
	// until then.
	OnAt, OffAt time.Duration
}

// Run is what a [Control] reads and commands of one live run; the runner
// fills it in when the run's timeline starts (t=0). A nil func reads as
// nothing (no streams, no services).
type Run struct {
	// Scenario is the run's scenario (defaulted and validated).
	Scenario *scenario.Scenario
	// Plan is the run's plan as built; a Control never changes it.
	Plan *plan.Plan
	// ID is the run's id.
	ID string
	// Clock is the run's clock (t=0: load started).
	Clock *event.Clock
	// Events is the run's event log; operator events are emitted to it.
	Events *event.Log
	// Log receives a line per operator action; nil discards them.
	Log *slog.Logger
	// Redactor redacts annotations; nil keeps them as written.
	Redactor *redact.Redactor
	// Phase names the part of the plan at an offset on the run's clock
	// (warmup, a window's name, run, end); nil: the phase is "run".
	Phase func(now time.Duration) string
	// Faults is the run's fault scheduler.
	Faults Faults
	// Streams returns each stream's figures over the last window.
	Streams func(window time.Duration) []load.StreamLive
	// Services returns the local services' replicas now (nil outside the
	// local runtime).
	Services func() []ServiceLive
	// StopLoad stops the load; the timeline runs on to its end.
	StopLoad func()
	// Abort stops the run's timeline now, err being why the run ends
	// (exit 3, as with Ctrl-C).
	Abort func(err error)
	// Windows keeps the stream-judged assertions' seconds for
	// [Control.Provisional] ([NewWindows]); nil: those are judged when
	// the run ends.
	Windows *Windows
}

// Control is an operator's handle on a live run (the game-day console):
// it reads the run's state and events and carries out commands, each
// recorded as an [event.Operator] event on the run's clock (and so in
// run.json and report.html). It is safe for concurrent use; concurrent
// commands on one fault are serialised by the fault scheduler, and the
// loser of a race gets an error wrapping [ErrConflict]. Once the timeline
// has stopped every command fails with [ErrConflict].
type Control struct {
	run Run
	// ctx is the timeline's context: done once the timeline stopped.
	ctx         context.Context
	mu          sync.Mutex
	loadStopped bool
}

// Start returns the [Control] of run, whose timeline runs until ctx ends,
// and keeps run.Windows following the operators' and the faults' events
// until then.
func Start(ctx context.Context, run Run) *Control {
	if run.Log == nil {
		run.Log = slog.New(slog.DiscardHandler)
	}
	c := &Control{run: run, ctx: ctx}
	if run.Windows != nil {
		go run.Windows.follow(ctx, run.Scenario, run.Plan, run.Events)
	}
	return c
}

// FaultLive is one fault's state now.
type FaultLive struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// State is pending, manual, on, held or ended.
	State string `json:"state"`
	// ManualStart / ManualEnd: the scenario leaves the start / the end to
	// an operator (at: manual / for: manual).
	ManualStart bool `json:"manualStart,omitempty"`
	ManualEnd   bool `json:"manualEnd,omitempty"`
	// At and For are the scheduled start and length (0 when manual).
	At  time.Duration `json:"at"`
	For time.Duration `json:"for"`
	// OnAt and OffAt are the actual times on the run's clock; -1 until then.
	OnAt  time.Duration `json:"onAt"`
	OffAt time.Duration `json:"offAt"`
}

// ServiceLive is a local service's replicas now.
type ServiceLive struct {
	Name     string `json:"name"`
	Ready    int    `json:"ready"`
	Replicas int    `json:"replicas"`
}

// State is a snapshot of a live run. Durations are offsets on the run's
// clock (t=0: load started), in nanoseconds in JSON.
type State struct {
	Scenario string        `json:"scenario"`
	RunID    string        `json:"runId"`
	Now      time.Duration `json:"now"`
	Duration time.Duration `json:"duration"`
	Warmup   time.Duration `json:"warmup"`
	// Phase is warmup, baseline, fault:<name>, recovery:<name>, run or end.
	Phase string `json:"phase"`
	// Running is false once the timeline has stopped.
	Running     bool          `json:"running"`
	LoadStopped bool          `json:"loadStopped"`
	Faults      []FaultLive   `json:"faults"`
	Streams     []StreamLive  `json:"streams"`
	Services    []ServiceLive `json:"services"`
}

// StreamLive is one stream's last second.
type StreamLive struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// IntendedRate, AchievedRate: requests per second over the last second.
	IntendedRate float64 `json:"intendedRate"`
	AchievedRate float64 `json:"achievedRate"`
	// FailedRate and ShedRate: failed (status >= 400 or transport error)
	// and shed (503/429 of the service, not drill's local Service's own
	// answers) responses per second.
	FailedRate float64 `json:"failedRate"`
	ShedRate   float64 `json:"shedRate"`
	// P50 and P99 latency, LagP99 the generator's dispatch lag p99 and
	// Behind how late the next request due is, over the last second.
	P50    time.Duration `json:"p50"`
	P99    time.Duration `json:"p99"`
	LagP99 time.Duration `json:"lagP99"`
	Behind time.Duration `json:"behind"`
	// Sent and Late are totals since the stream started.
	Sent int64 `json:"sent"`
	Late int64 `json:"late"`
}

// State returns the run's state now.
func (c *Control) State() State {
	r := c.run
	now := r.Clock.Now()
	phase := "run"
	if r.Phase != nil {
		phase = r.Phase(now)
	}
	st := State{
		Scenario: r.Scenario.Metadata.Name, RunID: r.ID, Now: now,
		Duration: r.Plan.Duration, Warmup: r.Plan.Warmup,
		Phase: phase, Running: c.ctx.Err() == nil,
	}
	c.mu.Lock()
	st.LoadStopped = c.loadStopped
	c.mu.Unlock()

	for _, fs := range c.faults() {
		fl := FaultLive{Name: fs.Spec.Name, Type: string(fs.Spec.Type), ManualStart: fs.Spec.ManualStart, ManualEnd: fs.Spec.ManualEnd,
			At: fs.Spec.At.D(), For: fs.Spec.For.D(), OnAt: fs.OnAt, OffAt: fs.OffAt}
		switch {
		case fs.On && fs.Held:
			fl.State = FaultHeld
		case fs.On:
			fl.State = FaultOnState
		case fs.Done:
			fl.State = FaultEnded
		case fs.Spec.ManualStart:
			fl.State = FaultWaiting
		default:
			fl.State = FaultPending
		}
		st.Faults = append(st.Faults, fl)
	}
	st.Phase = livePhase(st.Phase, st.Faults)
	if r.Streams != nil {
		for _, l := range r.Streams(time.Second) {
			st.Streams = append(st.Streams, streamLive(l))
		}
	}
	if r.Services != nil {
		st.Services = r.Services()
		sort.Slice(st.Services, func(i, j int) bool { return st.Services[i].Name < st.Services[j].Name })
	}
	return st
}

func streamLive(l load.StreamLive) StreamLive {
	s := StreamLive{Name: l.Stream, State: l.State, IntendedRate: l.IntendedRate, AchievedRate: l.AchievedRate,
		P50: l.P50, P99: l.P99, LagP99: l.LagP99, Behind: l.Behind, Sent: l.Sent, Late: l.Late}
	if secs := l.Window.Seconds(); secs > 0 {
		s.FailedRate = float64(l.Failures) / secs
		s.ShedRate = float64(l.Shed) / secs
	}
	return s
}

// Follow returns the events logged so far and sends every later one to ch
// without blocking (a full ch drops events for this follower only).
func (c *Control) Follow(ch chan<- event.Event) []event.Event {
	return c.run.Events.Follow(ch)
}

// Done is closed once the timeline has stopped (commands are then refused).
func (c *Control) Done() <-chan struct{} { return c.ctx.Done() }

// Clock is the run's clock.
func (c *Control) Clock() *event.Clock { return c.run.Clock }

// now is the run's clock now.
func (c *Control) now() time.Duration { return c.run.Clock.Now() }

// faults is each fault's state now (none without a scheduler).
func (c *Control) faults() []FaultStatus {
	if c.run.Faults == nil {
		return nil
	}
	return c.run.Faults.Status()
}

// record emits an operator event at at (taken when the command came, so
// that it precedes what the command caused).
func (c *Control) record(at time.Duration, who, action, fault, detail string) {
	c.run.Log.Info("operator action", "operator", who, "action", action, "fault", fault, "t", at.Round(time.Millisecond))
	c.run.Events.Emit(event.Event{At: at, Kind: event.Operator, Source: "console", Operator: who, Reason: action, Fault: fault, Detail: detail})
}

// fault returns the state of fault name now.
func (c *Control) fault(name string) (FaultStatus, error) {
	if c.ctx.Err() != nil {
		return FaultStatus{}, fmt.Errorf("the run's timeline is over: %w", ErrConflict)
	}
	for _, fs := range c.faults() {
		if fs.Spec.Name == name {
			return fs, nil
		}
	}
	return FaultStatus{}, fmt.Errorf("fault %q: %w", name, ErrUnknownFault)
}

// StartFault turns on a fault the scenario declares with at: manual. A
// fault with a fixed for: then ends on its own after that long (unless
// held); one with for: manual stays on until ended. It fails with
// [ErrUnknownFault], or [ErrConflict] when the fault is not manual, has
// already started, or could not be applied (the run then aborts, as
// with a scheduled fault).
func (c *Control) StartFault(name, who string) error {
	fs, err := c.fault(name)
	if err != nil {
		return err
	}
	if !fs.Spec.ManualStart {
		return fmt.Errorf("fault %q starts on the schedule (at: %s), not by hand: %w", name, fs.Spec.At.D(), ErrConflict)
	}
	at := c.now()
	if err := c.run.Faults.Start(c.ctx, name, "started by "+who); err != nil {
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("fault %q could not be applied (the run aborts): %w: %w", name, ErrConflict, err)
	}
	c.record(at, who, "start", name, "")
	if d := fs.Spec.For.D(); !fs.Spec.ManualEnd && d > 0 {
		go func() {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-c.ctx.Done():
			case <-t.C:
				_ = c.run.Faults.End(name, "scheduled", true)
			}
		}()
	}
	return nil
}

// EndFault turns a fault off now (held or not). It fails with
// [ErrUnknownFault], or [ErrConflict] when the fault is not on (not
// started yet, or already ended: of two operators ending it at once, one
// gets this).
func (c *Control) EndFault(name, who string) error {
	if _, err := c.fault(name); err != nil {
		return err
	}
	at := c.now()
	if err := c.run.Faults.End(name, "ended by "+who, false); err != nil {
		return err
	}
	c.record(at, who, "end", name, "")
	return nil
}

// HoldFault keeps a fault that is on past its scheduled end, until
// released or ended. It fails with [ErrUnknownFault], or [ErrConflict]
// when the fault is not on or is already held.
func (c *Control) HoldFault(name, who string) error {
	fs, err := c.fault(name)
	if err != nil {
		return err
	}
	at := c.now()
	switch {
	case !fs.On:
		return fmt.Errorf("fault %q is not on: %w", name, ErrConflict)
	case fs.Held:
		return fmt.Errorf("fault %q is already held: %w", name, ErrConflict)
	}
	if err := c.run.Faults.Hold(name, "held by "+who); err != nil {
		return err
	}
	c.record(at, who, "hold", name, "")
	return nil
}

// ReleaseFault lets a held fault end: at once when its scheduled end has
// passed, else on schedule. It fails with [ErrUnknownFault], or
// [ErrConflict] when the fault is not held.
func (c *Control) ReleaseFault(name, who string) error {
	fs, err := c.fault(name)
	if err != nil {
		return err
	}
	at := c.now()
	if !fs.On || !fs.Held {
		return fmt.Errorf("fault %q is not held: %w", name, ErrConflict)
	}
	if err := c.run.Faults.Release(name, "released by "+who); err != nil {
		return err
	}
	c.record(at, who, "release", name, "")
	if end, scheduled := plannedEnd(fs.Spec, fs.OnAt); scheduled && at >= end {
		// Its end came while it was held: it ends now. (Ended meanwhile
		// by someone else is fine.)
		_ = c.run.Faults.End(name, "released by "+who, false)
	}
	return nil
}

// plannedEnd is when a fault that went on at onAt is due to end, and
// whether it has such an end (not for: manual).
func plannedEnd(f scenario.Fault, onAt time.Duration) (time.Duration, bool) {
	switch {
	case f.ManualEnd:
		return 0, false
	case f.ManualStart:
		return onAt + f.For.D(), true
	}
	return f.At.D() + f.For.D(), true
}

// StopLoad ends every fault and stops the load; the timeline runs on to
// its end so that recovery is still watched (the stop-load action of a
// stop condition). It fails with [ErrConflict] when load was already
// stopped or the timeline is over.
func (c *Control) StopLoad(who string) error {
	if c.ctx.Err() != nil {
		return fmt.Errorf("the run's timeline is over: %w", ErrConflict)
	}
	at := c.now()
	c.mu.Lock()
	if c.loadStopped {
		c.mu.Unlock()
		return fmt.Errorf("load is already stopped: %w", ErrConflict)
	}
	c.loadStopped = true
	c.mu.Unlock()
	c.record(at, who, "stop", "", "load stopped, faults ended")
	c.run.Faults.EndAll("load stopped by " + who)
	c.run.StopLoad()
	return nil
}

// Abort ends every fault and stops the run now: reports are written and
// the run exits 3, as with Ctrl-C. It fails with [ErrConflict] when the
// timeline is already over.
func (c *Control) Abort(who string) error {
	at := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return fmt.Errorf("the run's timeline is over: %w", ErrConflict)
	}
	c.record(at, who, "abort", "", "run aborted")
	c.run.Faults.EndAll("aborted by " + who)
	c.run.Abort(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("aborted by %s from the console", who)))
	return nil
}

// Annotate puts free text on the run's timeline. It fails with
// [ErrBadCommand] for empty text, [ErrConflict] once the timeline is over.
// Text longer than 2,000 bytes is cut.
func (c *Control) Annotate(who, text string) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return fmt.Errorf("an annotation needs text: %w", ErrBadCommand)
	}
	if c.ctx.Err() != nil {
		return fmt.Errorf("the run's timeline is over: %w", ErrConflict)
	}
	if len(text) > maxAnnotation {
		text = strings.ToValidUTF8(text[:maxAnnotation], "")
	}
	if c.run.Redactor != nil {
		text = c.run.Redactor.Text(text)
	}
	c.record(c.now(), who, "annotation", "", text)
	return nil
}

// livePhase corrects the plan's phase with the faults' actual states: a
// fault window names the phase only while its fault is on (an operator
// may have ended it early, held it, or not started a manual one), and a
// fault that is on names it whatever the plan said.
func livePhase(planned string, faults []FaultLive) string {
	for _, f := range faults {
		if f.State == FaultOnState || f.State == FaultHeld {
			return scenario.PrefixFault + f.Name
		}
	}
	for _, f := range faults {
		switch planned {
		case scenario.PrefixFault + f.Name:
			if f.State == FaultEnded && f.OnAt >= 0 {
				return scenario.PrefixRecovery + f.Name
			}
			return "run"
		case scenario.PrefixRecovery + f.Name:
			if f.State != FaultEnded {
				return "run"
			}
		}
	}
	return planned
}
