package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// fakeFaults is a fault scheduler that keeps each fault's state and
// records the commands it is given.
type fakeFaults struct {
	mu       sync.Mutex
	status   []FaultStatus
	commands []string
}

func (f *fakeFaults) find(name string) *FaultStatus {
	for i := range f.status {
		if f.status[i].Spec.Name == name {
			return &f.status[i]
		}
	}
	return nil
}

func (f *fakeFaults) command(what, name, why string, apply func(*FaultStatus) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.find(name)
	if fs == nil || !apply(fs) {
		return fmt.Errorf("%w: %s %s does not apply", ErrConflict, what, name)
	}
	f.commands = append(f.commands, what+" "+name+" "+why)
	return nil
}

func (f *fakeFaults) Start(_ context.Context, name, why string) error {
	return f.command("start", name, why, func(fs *FaultStatus) bool {
		if fs.On || fs.Done {
			return false
		}
		fs.On = true
		return true
	})
}

func (f *fakeFaults) End(name, why string, scheduled bool) error {
	return f.command("end", name, why, func(fs *FaultStatus) bool {
		if !fs.On {
			return false
		}
		if !(scheduled && fs.Held) {
			fs.On, fs.Held, fs.Done = false, false, true
		}
		return true
	})
}

func (f *fakeFaults) Hold(name, why string) error {
	return f.command("hold", name, why, func(fs *FaultStatus) bool {
		if !fs.On || fs.Held {
			return false
		}
		fs.Held = true
		return true
	})
}

func (f *fakeFaults) Release(name, why string) error {
	return f.command("release", name, why, func(fs *FaultStatus) bool {
		if !fs.Held {
			return false
		}
		fs.Held = false
		return true
	})
}

func (f *fakeFaults) EndAll(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, "end-all "+why)
}

func (f *fakeFaults) Status() []FaultStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FaultStatus(nil), f.status...)
}

// TestHoldReleaseThroughTheScheduler: an operator's hold and release are
// commands to the fault scheduler, each recorded as an operator event; a
// release after the fault's scheduled end ends it (the release recorded
// first); commands that do not fit the fault's state are conflicts that
// record nothing.
func TestHoldReleaseThroughTheScheduler(t *testing.T) {
	sec := time.Second
	f := &fakeFaults{status: []FaultStatus{
		{Spec: scenario.Fault{Name: "held", At: scenario.Duration{Duration: 2 * sec}, For: scenario.Duration{Duration: 3 * sec}}, On: true, OnAt: 2 * sec, OffAt: -1},
		{Spec: scenario.Fault{Name: "later", At: scenario.Duration{Duration: 50 * sec}, For: scenario.Duration{Duration: 3 * sec}}, OnAt: -1, OffAt: -1},
	}}
	evlog := &event.Log{}
	// t+6 s now: past the held fault's scheduled end (2 s + 3 s).
	c := Start(context.Background(), Run{
		Scenario: &scenario.Scenario{}, Plan: &plan.Plan{Duration: 60 * sec},
		Clock: event.NewClockAt(time.Now().Add(-6 * sec)), Events: evlog, Faults: f,
	})
	for _, step := range []struct {
		what    string
		do      func() error
		wantErr string
	}{
		{"hold", func() error { return c.HoldFault("held", "ann") }, ""},
		{"hold again", func() error { return c.HoldFault("held", "bob") }, `fault "held" is already held: conflict`},
		{"hold a fault not on", func() error { return c.HoldFault("later", "ann") }, `fault "later" is not on: conflict`},
		{"release a fault not held", func() error { return c.ReleaseFault("later", "ann") }, `fault "later" is not held: conflict`},
		{"hold an unknown fault", func() error { return c.HoldFault("nope", "ann") }, `fault "nope": no such fault`},
		{"release", func() error { return c.ReleaseFault("held", "bob") }, ""},
		{"release again", func() error { return c.ReleaseFault("held", "bob") }, `fault "held" is not held: conflict`},
	} {
		err := step.do()
		switch {
		case step.wantErr == "" && err != nil:
			t.Errorf("%s: %v", step.what, err)
		case step.wantErr != "" && (err == nil || err.Error() != step.wantErr):
			t.Errorf("%s: err %v, want %q", step.what, err, step.wantErr)
		}
	}
	if want := []string{"hold held held by ann", "release held released by bob", "end held released by bob"}; strings.Join(f.commands, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands to the scheduler:\n%s\nwant:\n%s", strings.Join(f.commands, "\n"), strings.Join(want, "\n"))
	}
	var ops []string
	for _, e := range evlog.Events() {
		ops = append(ops, string(e.Kind)+" "+e.Reason+" "+e.Fault+" "+e.Operator)
	}
	if want := []string{"operator hold held ann", "operator release held bob"}; strings.Join(ops, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
	}
	if err := c.EndFault("held", "ann"); !errors.Is(err, ErrConflict) {
		t.Errorf("end of an ended fault: err %v, want a conflict", err)
	}
}
