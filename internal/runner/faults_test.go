package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/control"
)

// TestFaultSchedulerHoldRelease: hold and release are the scheduler's
// commands: a fault is held once, released once, a release lets its
// scheduled end apply again, and the console's side of the scheduler
// turns a command that does not apply into control.ErrConflict.
func TestFaultSchedulerHoldRelease(t *testing.T) {
	f := newSchedulerFixture(t)
	ctx := context.Background()
	f.clock.Advance(time.Second)
	if err := f.sched.do(ctx, faultCommand{Kind: faultStart, Fault: "a", Why: "operator"}); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.do(ctx, faultCommand{Kind: faultHold, Fault: "a", Why: "operator"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []faultCommand{
		{Kind: faultHold, Fault: "a"},    // already held
		{Kind: faultRelease, Fault: "b"}, // not on
	} {
		if err := f.sched.do(ctx, c); !errors.Is(err, errFaultCommand) {
			t.Errorf("%+v: err %v, want errFaultCommand", c, err)
		}
	}
	if st := f.sched.status(); !st[0].On || !st[0].Held || st[0].OnAt != time.Second || st[0].OffAt != -1 || st[1].On || st[1].OnAt != -1 {
		t.Errorf("status while a is held: %+v", st)
	}
	f.clock.Advance(time.Second)
	if err := f.sched.do(ctx, faultCommand{Kind: faultEnd, Fault: "a", Why: "scheduled", scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.do(ctx, faultCommand{Kind: faultRelease, Fault: "a", Why: "operator"}); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.do(ctx, faultCommand{Kind: faultRelease, Fault: "a"}); !errors.Is(err, errFaultCommand) {
		t.Errorf("second release: err %v, want errFaultCommand", err)
	}
	f.clock.Advance(time.Second)
	// Released, the fault's scheduled end applies again.
	if err := f.sched.do(ctx, faultCommand{Kind: faultEnd, Fault: "a", Why: "scheduled", scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if st := f.sched.status(); st[0].On || st[0].Held || !st[0].Done || st[0].OffAt != 3*time.Second {
		t.Errorf("status after a's end: %+v", st[0])
	}
	sameLines(t, "events", eventLines(f.evlog), []string{"fault-on@1s a latency", "fault-off@3s a scheduled"})

	cf := consoleFaults{f.sched}
	for name, err := range map[string]error{
		"hold b":    cf.Hold("b", "operator"),
		"release b": cf.Release("b", "operator"),
		"end a":     cf.End("a", "operator", false),
		"start a":   cf.Start(ctx, "a", "operator"),
	} {
		if !errors.Is(err, control.ErrConflict) || !errors.Is(err, errFaultCommand) {
			t.Errorf("%s: err %v, want a conflict", name, err)
		}
	}
}
