package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/load"
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

// faultControl is what the console reads of one fault, guarded by the
// fault's own mutex (faultState.mu).
type faultControl struct {
	// onAt and offAt are when the fault went on and off, valid when
	// wasOn / wasOff.
	onAt, offAt   time.Duration
	wasOn, wasOff bool
}

// markOn records that the fault went on at at (the caller holds fs.mu).
func (c *faultControl) markOn(at time.Duration) { c.onAt, c.wasOn = at, true }

// markOff records that the fault went off at at (the caller holds fs.mu).
func (c *faultControl) markOff(at time.Duration) { c.offAt, c.wasOff = at, true }

// Control is an operator's handle on a live run (the game-day console):
// it reads the run's state and events and carries out commands, each
// recorded as an [event.Operator] event on the run's clock (and so in
// run.json and report.html). It is safe for concurrent use; concurrent
// commands on one fault are serialised, and the loser of a race gets an
// error wrapping [ErrConflict]. Once the timeline has stopped every
// command fails with [ErrConflict].
type Control struct {
	tl *timeline
	// ctx is the timeline's context: done once the timeline stopped.
	ctx                    context.Context
	stopLoad, stopTimeline context.CancelFunc
	mu                     sync.Mutex
	loadStopped            bool
}

// goLive hands the run's [Control] to Options.OnLive once the timeline
// runs (t=0).
func (tl *timeline) goLive(ctx context.Context, stopLoad, stopTimeline context.CancelFunc) {
	if tl.r.opts.OnLive == nil {
		return
	}
	c := &Control{tl: tl, ctx: ctx, stopLoad: stopLoad, stopTimeline: stopTimeline}
	if tl.live != nil {
		go tl.live.follow(ctx, tl.r)
	}
	tl.r.opts.OnLive(c)
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
	tl, r := c.tl, c.tl.r
	now := r.clock.Now()
	st := State{
		Scenario: r.sc.Metadata.Name, RunID: r.id, Now: now,
		Duration: r.plan.Duration, Warmup: r.plan.Warmup,
		Phase: phaseAt(r.plan, now), Running: c.ctx.Err() == nil,
	}
	c.mu.Lock()
	st.LoadStopped = c.loadStopped
	c.mu.Unlock()

	for _, name := range tl.faults.order {
		fs := tl.faults.faults[name]
		fs.mu.Lock()
		fl := FaultLive{Name: name, Type: string(fs.spec.Type), ManualStart: fs.spec.ManualStart, ManualEnd: fs.spec.ManualEnd,
			At: fs.spec.At.D(), For: fs.spec.For.D(), OnAt: -1, OffAt: -1}
		switch {
		case fs.on && fs.held:
			fl.State = FaultHeld
		case fs.on:
			fl.State = FaultOnState
		case fs.done:
			fl.State = FaultEnded
		case fs.spec.ManualStart:
			fl.State = FaultWaiting
		default:
			fl.State = FaultPending
		}
		if fs.ctl.wasOn {
			fl.OnAt = fs.ctl.onAt
		}
		if fs.ctl.wasOff {
			fl.OffAt = fs.ctl.offAt
		}
		fs.mu.Unlock()
		st.Faults = append(st.Faults, fl)
	}
	st.Phase = livePhase(st.Phase, st.Faults)
	for _, l := range tl.engine.Live(time.Second) {
		st.Streams = append(st.Streams, streamLive(l))
	}
	if r.env != nil {
		for name, svc := range r.env.services {
			sl := ServiceLive{Name: name}
			for _, rs := range svc.Status() {
				sl.Replicas++
				if rs.Ready {
					sl.Ready++
				}
			}
			st.Services = append(st.Services, sl)
		}
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
	return c.tl.r.evlog.Follow(ch)
}

// Done is closed once the timeline has stopped (commands are then refused).
func (c *Control) Done() <-chan struct{} { return c.ctx.Done() }

// Clock is the run's clock.
func (c *Control) Clock() *event.Clock { return c.tl.r.clock }

// now is the run's clock now.
func (c *Control) now() time.Duration { return c.tl.r.clock.Now() }

// record emits an operator event at at (taken when the command came, so
// that it precedes what the command caused).
func (c *Control) record(at time.Duration, who, action, fault, detail string) {
	r := c.tl.r
	r.log.Info("operator action", "operator", who, "action", action, "fault", fault, "t", at.Round(time.Millisecond))
	r.evlog.Emit(event.Event{At: at, Kind: event.Operator, Source: "console", Operator: who, Reason: action, Fault: fault, Detail: detail})
}

func (c *Control) fault(name string) (*faultState, error) {
	if c.ctx.Err() != nil {
		return nil, fmt.Errorf("the run's timeline is over: %w", ErrConflict)
	}
	fs := c.tl.faults.faults[name]
	if fs == nil {
		return nil, fmt.Errorf("fault %q: %w", name, ErrUnknownFault)
	}
	return fs, nil
}

// conflict turns the scheduler's refusal into [ErrConflict].
func conflict(err error) error {
	if errors.Is(err, errFaultCommand) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
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
	if !fs.spec.ManualStart {
		return fmt.Errorf("fault %q starts on the schedule (at: %s), not by hand: %w", name, fs.spec.At.D(), ErrConflict)
	}
	at := c.now()
	if err := c.tl.faults.do(c.ctx, faultCommand{Kind: faultStart, Fault: name, Why: "started by " + who}); err != nil {
		if errors.Is(err, errFaultCommand) {
			return conflict(err)
		}
		return fmt.Errorf("fault %q could not be applied (the run aborts): %w: %w", name, ErrConflict, err)
	}
	c.record(at, who, "start", name, "")
	if d := fs.spec.For.D(); !fs.spec.ManualEnd && d > 0 {
		go func() {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-c.ctx.Done():
			case <-t.C:
				_ = c.tl.faults.do(c.ctx, faultCommand{Kind: faultEnd, Fault: name, Why: "scheduled", scheduled: true})
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
	if err := c.tl.faults.do(c.ctx, faultCommand{Kind: faultEnd, Fault: name, Why: "ended by " + who}); err != nil {
		return conflict(err)
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
	fs.mu.Lock()
	switch {
	case !fs.on || fs.done:
		fs.mu.Unlock()
		return fmt.Errorf("fault %q is not on: %w", name, ErrConflict)
	case fs.held:
		fs.mu.Unlock()
		return fmt.Errorf("fault %q is already held: %w", name, ErrConflict)
	}
	fs.held = true
	fs.mu.Unlock()
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
	fs.mu.Lock()
	if !fs.on || !fs.held {
		fs.mu.Unlock()
		return fmt.Errorf("fault %q is not held: %w", name, ErrConflict)
	}
	fs.held = false
	end, scheduled := plannedEnd(fs.spec, fs.ctl.onAt)
	fs.mu.Unlock()
	c.record(at, who, "release", name, "")
	if scheduled && at >= end {
		// Its end came while it was held: it ends now. (Ended meanwhile
		// by someone else is fine.)
		_ = c.tl.faults.do(c.ctx, faultCommand{Kind: faultEnd, Fault: name, Why: "released by " + who})
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
	c.tl.faults.endAll("load stopped by " + who)
	c.stopLoad()
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
	c.tl.faults.endAll("aborted by " + who)
	c.tl.abort(exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("aborted by %s from the console", who)))
	c.stopTimeline()
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
	c.record(c.now(), who, "annotation", "", c.tl.r.redactor.Text(text))
	return nil
}

// followOperators moves the plan's windows of the faults operators
// touched to their actual times (see [plan.Plan.FollowOperators]).
func (r *run) followOperators(events []event.Event) {
	r.plan.FollowOperators(r.sc.Faults, events, r.sc.Timeline.Recovery.D())
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
