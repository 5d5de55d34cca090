package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// faultCommandKind says what a [faultCommand] does to its fault.
type faultCommandKind int

const (
	// faultStart switches the fault on (once: an ended fault does not
	// come back).
	faultStart faultCommandKind = iota
	// faultEnd switches the fault off for good, held or not.
	faultEnd
	// faultHold keeps a fault that is on from being switched off by its
	// scheduled end; a faultEnd, a stop condition or the end of the run
	// still end it.
	faultHold
	// faultRelease lets a held fault be switched off by its scheduled end
	// again. It does not end the fault: whoever releases a fault whose
	// scheduled end has passed ends it.
	faultRelease
)

// faultCommand is one thing the scheduler is asked to do with one fault:
// the plan's fault-on and fault-off actions at their times
// ([faultScheduler.run]), or a command given at any moment
// ([faultScheduler.do], e.g. an operator's).
type faultCommand struct {
	Kind  faultCommandKind
	Fault string
	// Why is said in the logs and in the fault-off event's detail
	// ("scheduled", "stop condition NAME", "end of run", ...).
	Why string
	// scheduled marks the plan's own actions: a held fault ignores its
	// scheduled end.
	scheduled bool
}

// errFaultCommand is wrapped by the errors of commands that do not apply
// to their fault's state (no such fault, already on, already ended, not
// on, already held, not held); nothing was changed.
var errFaultCommand = errors.New("fault command does not apply")

// faultState tracks one scheduled fault.
type faultState struct {
	spec     scenario.Fault
	injector inject.Injector
	mu       sync.Mutex
	revert   inject.Revert
	on, done bool
	held     bool
	// onAt and offAt are when the fault went on and off, valid when
	// wasOn / wasOff.
	onAt, offAt   time.Duration
	wasOn, wasOff bool
}

// faultScheduler switches a run's faults on and off: at the plan's times
// ([faultScheduler.run]) and on command ([faultScheduler.do],
// [faultScheduler.endAll]). Each switch is logged and leaves a fault-on,
// fault-off or fault-error event at the clock's offset; every applied
// fault's revert is on the run's stack, so it is undone on every exit
// path. Its methods are safe for concurrent use.
type faultScheduler struct {
	clock timelineClock
	log   *slog.Logger
	evlog *event.Log
	stack *inject.Stack
	// failed is told when a fault cannot be applied (the run then aborts,
	// exit 3).
	failed func(error)
	faults map[string]*faultState
	order  []string
}

// newFaultScheduler returns a scheduler with no fault; add them with
// [faultScheduler.add].
func newFaultScheduler(clock timelineClock, log *slog.Logger, evlog *event.Log, stack *inject.Stack, failed func(error)) *faultScheduler {
	return &faultScheduler{clock: clock, log: log, evlog: evlog, stack: stack, failed: failed, faults: map[string]*faultState{}}
}

// add schedules fault spec, applied by inj.
func (s *faultScheduler) add(spec scenario.Fault, inj inject.Injector) {
	s.faults[spec.Name] = &faultState{spec: spec, injector: inj}
	s.order = append(s.order, spec.Name)
}

// specs returns the faults in scenario order.
func (s *faultScheduler) specs() []scenario.Fault {
	out := make([]scenario.Fault, 0, len(s.order))
	for _, name := range s.order {
		out = append(out, s.faults[name].spec)
	}
	return out
}

// status returns each fault's state now, in scenario order.
func (s *faultScheduler) status() []control.FaultStatus {
	out := make([]control.FaultStatus, 0, len(s.order))
	for _, name := range s.order {
		fs := s.faults[name]
		fs.mu.Lock()
		st := control.FaultStatus{Spec: fs.spec, On: fs.on, Held: fs.held, Done: fs.done, OnAt: -1, OffAt: -1}
		if fs.wasOn {
			st.OnAt = fs.onAt
		}
		if fs.wasOff {
			st.OffAt = fs.offAt
		}
		fs.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// active names the faults that are on now, in scenario order.
func (s *faultScheduler) active() []string {
	var out []string
	for _, name := range s.order {
		fs := s.faults[name]
		fs.mu.Lock()
		if fs.on {
			out = append(out, name)
		}
		fs.mu.Unlock()
	}
	return out
}

// run carries out the fault-on and fault-off actions of actions (the
// plan's, in time order) at their offsets, until they are done or ctx
// ends.
func (s *faultScheduler) run(ctx context.Context, actions []plan.Action) {
	for _, a := range actions {
		if a.Kind != plan.FaultOn && a.Kind != plan.FaultOff {
			continue
		}
		if wait := a.At - s.clock.Now(); wait > 0 {
			t := s.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
		if ctx.Err() != nil {
			return
		}
		c := faultCommand{Kind: faultStart, Fault: a.Target, Why: "scheduled", scheduled: true}
		if a.Kind == plan.FaultOff {
			c.Kind = faultEnd
		}
		// A scheduled switch that does not apply (the fault already
		// ended early, or never came on) is nothing to do.
		_ = s.do(ctx, c)
	}
}

// do carries out c now. It returns an error wrapping errFaultCommand when
// c does not apply to its fault's state, and the apply error when a fault
// could not be switched on (then also told to failed, and the run
// aborts).
func (s *faultScheduler) do(ctx context.Context, c faultCommand) error {
	fs := s.faults[c.Fault]
	if fs == nil {
		return fmt.Errorf("%w: no fault %q", errFaultCommand, c.Fault)
	}
	switch c.Kind {
	case faultStart:
		return s.turnOn(ctx, fs)
	case faultEnd:
		return s.turnOff(fs, c.Why, c.scheduled)
	case faultHold:
		fs.mu.Lock()
		defer fs.mu.Unlock()
		switch {
		case !fs.on:
			return fmt.Errorf("%w: fault %s is not on", errFaultCommand, c.Fault)
		case fs.held:
			return fmt.Errorf("%w: fault %s is already held", errFaultCommand, c.Fault)
		}
		fs.held = true
		s.log.Info("fault held", "fault", c.Fault, "why", c.Why, "t", s.clock.Now().Round(time.Millisecond))
		return nil
	case faultRelease:
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if !fs.on || !fs.held {
			return fmt.Errorf("%w: fault %s is not held", errFaultCommand, c.Fault)
		}
		fs.held = false
		s.log.Info("fault released", "fault", c.Fault, "why", c.Why, "t", s.clock.Now().Round(time.Millisecond))
		return nil
	}
	return fmt.Errorf("%w: unknown command %d", errFaultCommand, c.Kind)
}

func (s *faultScheduler) turnOn(ctx context.Context, fs *faultState) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.on || fs.done {
		return fmt.Errorf("%w: fault %s is already on or has ended", errFaultCommand, fs.spec.Name)
	}
	revert, err := fs.injector.Inject(ctx)
	at := s.clock.Now()
	if err != nil {
		s.log.Error("fault could not be applied", "fault", fs.spec.Name, "err", err)
		s.evlog.Emit(event.Event{At: at, Kind: event.FaultError, Source: "run", Fault: fs.spec.Name, Detail: err.Error()})
		err = exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("apply fault %s: %w", fs.spec.Name, err))
		s.failed(err)
		fs.done = true
		if revert != nil {
			s.stack.Push("fault "+fs.spec.Name, revert)
		}
		return err
	}
	fs.revert = s.stack.Push("fault "+fs.spec.Name, revert)
	fs.on = true
	fs.onAt, fs.wasOn = at, true
	s.log.Info("fault on", "fault", fs.spec.Name, "type", fs.spec.Type, "t", at.Round(time.Millisecond))
	s.evlog.Emit(event.Event{At: at, Kind: event.FaultOn, Source: "run", Fault: fs.spec.Name, Detail: string(fs.spec.Type)})
	return nil
}

// turnOff reverts fs if it is on (a held fault ignores its scheduled
// end). A failed revert leaves a fault-error event; the revert stays on
// the stack, which the run retries at its end.
func (s *faultScheduler) turnOff(fs *faultState, why string, scheduled bool) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.on || fs.done {
		return fmt.Errorf("%w: fault %s is not on", errFaultCommand, fs.spec.Name)
	}
	if scheduled && fs.held {
		s.log.Info("fault held past its scheduled end", "fault", fs.spec.Name, "t", s.clock.Now().Round(time.Millisecond))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := fs.revert(ctx)
	at := s.clock.Now()
	fs.on, fs.done = false, true
	fs.offAt, fs.wasOff = at, true
	if err != nil {
		s.log.Error("fault could not be reverted", "fault", fs.spec.Name, "err", err)
		s.evlog.Emit(event.Event{At: at, Kind: event.FaultError, Source: "run", Fault: fs.spec.Name, Detail: "revert: " + err.Error()})
		return fmt.Errorf("revert fault %s: %w", fs.spec.Name, err)
	}
	s.log.Info("fault off", "fault", fs.spec.Name, "why", why, "t", at.Round(time.Millisecond))
	s.evlog.Emit(event.Event{At: at, Kind: event.FaultOff, Source: "run", Fault: fs.spec.Name, Detail: why})
	return nil
}

// endAll reverts every fault that is on now, held or not, and ends every
// fault for good: one that has not come on yet never will (stop
// conditions, the end of the run).
func (s *faultScheduler) endAll(why string) {
	for _, name := range s.order {
		fs := s.faults[name]
		_ = s.turnOff(fs, why, false)
		fs.mu.Lock()
		fs.done = true // a fault ended early does not come back
		fs.mu.Unlock()
	}
}
