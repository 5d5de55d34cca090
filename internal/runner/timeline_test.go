package runner

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/clock"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/scenario"
)

// fakeClock is a timelineClock whose time moves only by Advance. Its
// timers deliver on unbuffered channels and Advance waits for each
// delivery, so when Advance returns every due timer has been taken.
type fakeClock struct {
	t      *testing.T
	mu     sync.Mutex
	now    time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	clock   *fakeClock
	c       chan time.Time
	at      time.Duration
	every   time.Duration // 0: a timer
	stopped bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop stops t; false if it had fired or been stopped.
func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped && t.at >= 0
	t.stopped = true
	return was
}

// fakeTicker is a ticker of a fakeClock: a fakeTimer that fires every
// period.
type fakeTicker struct{ *fakeTimer }

func (t fakeTicker) Stop() { t.fakeTimer.Stop() }

func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer { return c.add(d, 0) }

func (c *fakeClock) NewTicker(d time.Duration) clock.Ticker { return fakeTicker{c.add(d, d)} }

func (c *fakeClock) add(d, every time.Duration) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, c: make(chan time.Time), at: c.now + d, every: every}
	c.timers = append(c.timers, t)
	return t
}

// pending counts timers not stopped and not yet fired (tickers always).
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped && t.at >= 0 {
			n++
		}
	}
	return n
}

// waitPending waits until n timers are pending: the code under test is
// waiting on its clock again.
func (c *fakeClock) waitPending(n int) {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.pending() != n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%d timers pending, want %d", c.pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Advance moves the time on by d and delivers every timer then due, once
// each, in time order.
func (c *fakeClock) Advance(d time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	c.now += d
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped && t.at >= 0 && t.at <= c.now {
			due = append(due, t)
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].at < due[j].at })
	for _, t := range due {
		if t.every > 0 {
			for t.at <= c.now {
				t.at += t.every
			}
		} else {
			t.at = -1 // fired
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		select {
		case t.c <- time.Time{}:
		case <-time.After(5 * time.Second):
			c.t.Fatalf("a timer due at %s was not taken", c.Now())
		}
	}
}

// fakeInjector applies nothing; it counts its calls.
type fakeInjector struct {
	mu              sync.Mutex
	applied, undone int
	err             error
}

func (f *fakeInjector) Inject(context.Context) (inject.Revert, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.applied++
	return func(context.Context) error {
		f.mu.Lock()
		f.undone++
		f.mu.Unlock()
		return nil
	}, nil
}

func (f *fakeInjector) counts() (applied, undone int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.undone
}

// schedulerFixture is a scheduler with faults a and b on a fake clock.
type schedulerFixture struct {
	clock  *fakeClock
	evlog  *event.Log
	stack  *inject.Stack
	inj    map[string]*fakeInjector
	sched  *faultScheduler
	failed []error
}

func newSchedulerFixture(t *testing.T) *schedulerFixture {
	f := &schedulerFixture{clock: &fakeClock{t: t}, evlog: &event.Log{}, stack: &inject.Stack{}, inj: map[string]*fakeInjector{}}
	f.sched = newFaultScheduler(f.clock, slog.New(slog.DiscardHandler), f.evlog, f.stack, func(err error) { f.failed = append(f.failed, err) })
	for _, name := range []string{"a", "b"} {
		f.inj[name] = &fakeInjector{}
		f.sched.add(scenario.Fault{Name: name, Type: scenario.FaultType("latency")}, f.inj[name])
	}
	return f
}

// events returns the log's events as "KIND@OFFSET FAULT DETAIL" lines.
func eventLines(l *event.Log) []string {
	var out []string
	for _, e := range l.Events() {
		out = append(out, string(e.Kind)+"@"+e.At.String()+" "+e.Fault+" "+e.Detail)
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFaultSchedulerRunsThePlan: the plan's fault actions happen at their
// offsets on the clock, each leaving its event; other actions are skipped.
func TestFaultSchedulerRunsThePlan(t *testing.T) {
	f := newSchedulerFixture(t)
	actions := []plan.Action{
		{At: time.Second, Kind: plan.StreamStart, Target: "orders"},
		{At: 2 * time.Second, Kind: plan.FaultOn, Target: "a"},
		{At: 3 * time.Second, Kind: plan.FaultOn, Target: "b"},
		{At: 5 * time.Second, Kind: plan.FaultOff, Target: "a"},
		{At: 6 * time.Second, Kind: plan.FaultOff, Target: "b"},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sched.run(context.Background(), actions)
	}()
	f.clock.waitPending(1)
	f.clock.Advance(2 * time.Second)
	f.clock.waitPending(1)
	if got := f.sched.active(); len(got) != 1 || got[0] != "a" {
		t.Errorf("active at t=2s: %v, want [a]", got)
	}
	f.clock.Advance(time.Second)
	f.clock.waitPending(1)
	f.clock.Advance(2 * time.Second)
	f.clock.waitPending(1)
	f.clock.Advance(time.Second)
	<-done
	sameLines(t, "events", eventLines(f.evlog), []string{
		"fault-on@2s a latency", "fault-on@3s b latency", "fault-off@5s a scheduled", "fault-off@6s b scheduled",
	})
	for name, inj := range f.inj {
		if applied, undone := inj.counts(); applied != 1 || undone != 1 {
			t.Errorf("fault %s applied %d, undone %d times, want once each", name, applied, undone)
		}
	}
	if n := f.stack.Pending(); n != 0 {
		t.Errorf("%d reverts left on the stack", n)
	}
}

// TestFaultSchedulerStopsWithItsContext: nothing is switched after ctx
// ends, and run returns.
func TestFaultSchedulerStopsWithItsContext(t *testing.T) {
	f := newSchedulerFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sched.run(ctx, []plan.Action{{At: time.Second, Kind: plan.FaultOn, Target: "a"}})
	}()
	f.clock.waitPending(1)
	cancel()
	<-done
	if ev := eventLines(f.evlog); len(ev) != 0 {
		t.Errorf("events after cancel: %v", ev)
	}
}

// TestFaultSchedulerCommands: commands given at any moment (an operator's
// start, hold and end) switch faults as the plan's do, a held fault
// outlives its scheduled end, and a command that does not apply changes
// nothing.
func TestFaultSchedulerCommands(t *testing.T) {
	f := newSchedulerFixture(t)
	ctx := context.Background()
	f.clock.Advance(time.Second)
	if err := f.sched.do(ctx, faultCommand{Kind: faultStart, Fault: "a", Why: "operator"}); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.do(ctx, faultCommand{Kind: faultHold, Fault: "a", Why: "operator"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	// The plan's end of a held fault is skipped.
	if err := f.sched.do(ctx, faultCommand{Kind: faultEnd, Fault: "a", Why: "scheduled", scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if got := f.sched.active(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("held fault not active after its scheduled end: %v", got)
	}
	f.clock.Advance(time.Second)
	if err := f.sched.do(ctx, faultCommand{Kind: faultEnd, Fault: "a", Why: "operator"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []faultCommand{
		{Kind: faultStart, Fault: "a"},          // ended: does not come back
		{Kind: faultEnd, Fault: "b"},            // never on
		{Kind: faultHold, Fault: "b"},           // not on
		{Kind: faultStart, Fault: "no-such"},    // unknown
		{Kind: faultCommandKind(9), Fault: "b"}, // unknown command
	} {
		if err := f.sched.do(ctx, c); !errors.Is(err, errFaultCommand) {
			t.Errorf("%+v: err %v, want errFaultCommand", c, err)
		}
	}
	sameLines(t, "events", eventLines(f.evlog), []string{"fault-on@1s a latency", "fault-off@3s a operator"})
}

// TestFaultSchedulerApplyError: a fault that cannot be applied leaves a
// fault-error event, aborts the run (exit 3) and does not come back.
func TestFaultSchedulerApplyError(t *testing.T) {
	f := newSchedulerFixture(t)
	f.inj["a"].err = errors.New("proxy pg: connection refused")
	err := f.sched.do(context.Background(), faultCommand{Kind: faultStart, Fault: "a"})
	if exitcode.Code(err) != exitcode.CouldNotRun || len(f.failed) != 1 || f.failed[0] != err {
		t.Fatalf("err %v (exit %d), failed %v; want exit 3, told once", err, exitcode.Code(err), f.failed)
	}
	if want := "apply fault a: proxy pg: connection refused"; err.Error() != want {
		t.Errorf("err %q, want %q", err, want)
	}
	f.inj["a"].err = nil
	if err := f.sched.do(context.Background(), faultCommand{Kind: faultStart, Fault: "a"}); !errors.Is(err, errFaultCommand) {
		t.Errorf("failed fault started again: %v", err)
	}
	sameLines(t, "events", eventLines(f.evlog), []string{"fault-error@0s a proxy pg: connection refused"})
}

// TestFaultSchedulerEndAll: every fault on is ended (held ones too), and
// one not yet on never comes on.
func TestFaultSchedulerEndAll(t *testing.T) {
	f := newSchedulerFixture(t)
	ctx := context.Background()
	_ = f.sched.do(ctx, faultCommand{Kind: faultStart, Fault: "a"})
	_ = f.sched.do(ctx, faultCommand{Kind: faultHold, Fault: "a"})
	f.clock.Advance(time.Second)
	f.sched.endAll("end of run")
	if err := f.sched.do(ctx, faultCommand{Kind: faultStart, Fault: "b", scheduled: true}); !errors.Is(err, errFaultCommand) {
		t.Errorf("fault b came on after endAll: %v", err)
	}
	sameLines(t, "events", eventLines(f.evlog), []string{"fault-on@0s a latency", "fault-off@1s a end of run"})
}

// TestStopConditionActions: a stop condition fires once its stream's
// error rate has stayed above the threshold for its For (not when it
// dips), once, and its action leaves what it must: a stop-condition event
// naming it, the faults on ended with "stop condition NAME" (not with
// warn), the load stopped (stop-load), or the run aborted with exit 3 and
// the timeline ended (abort), which the run's record then reports as
// aborted.
func TestStopConditionActions(t *testing.T) {
	const detail = "too-many-errors: orders error rate 90.0% above 50.0% for 2s; action "
	for _, c := range []struct {
		action       scenario.StopAction
		events       []string
		stopLoad     bool
		stopTimeline bool
		aborted      bool
	}{
		{"", []string{"fault-on@0s a latency", "stop-condition@5s  " + detail + "end-faults", "fault-off@5s a stop condition too-many-errors"}, false, false, false},
		{scenario.StopEndFaults, []string{"fault-on@0s a latency", "stop-condition@5s  " + detail + "end-faults", "fault-off@5s a stop condition too-many-errors"}, false, false, false},
		{scenario.StopLoad, []string{"fault-on@0s a latency", "stop-condition@5s  " + detail + "stop-load", "fault-off@5s a stop condition too-many-errors"}, true, false, false},
		{scenario.StopAbort, []string{"fault-on@0s a latency", "stop-condition@5s  " + detail + "abort", "fault-off@5s a stop condition too-many-errors"}, false, true, true},
		{scenario.StopWarn, []string{"fault-on@0s a latency", "stop-condition@5s  " + detail + "warn"}, false, false, false},
	} {
		t.Run(string(c.action), func(t *testing.T) {
			f := newSchedulerFixture(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_ = f.sched.do(ctx, faultCommand{Kind: faultStart, Fault: "a"})
			// The error rate the stream shows at each check (t=1s, 2s, ...):
			// above the threshold at 1 s, dipping at 2 s, then above from
			// 3 s on: the condition fires at 5 s, 2 s after it went above,
			// and only once.
			rates := []float64{0.9, 0.1, 0.9, 0.9, 0.9, 0.9}
			var mu sync.Mutex
			tick := 0
			var stoppedLoad, stoppedTimeline bool
			var abortErr error
			w := &stopWatcher{
				clock: f.clock, log: slog.New(slog.DiscardHandler), evlog: f.evlog,
				conds: []scenario.StopCondition{{Name: "too-many-errors", Stream: "orders", ErrorRateAbove: 0.5,
					For: scenario.Duration{Duration: 2 * time.Second}, Action: c.action}},
				live: func() []load.StreamLive {
					mu.Lock()
					defer mu.Unlock()
					r := rates[min(tick, len(rates)-1)]
					tick++
					return []load.StreamLive{{Stream: "orders", ErrorRate: r}, {Stream: "other", ErrorRate: 1}}
				},
				faults:       f.sched,
				stopLoad:     func() { mu.Lock(); stoppedLoad = true; mu.Unlock() },
				stopTimeline: func() { mu.Lock(); stoppedTimeline = true; mu.Unlock() },
				abort:        func(err error) { mu.Lock(); abortErr = err; mu.Unlock() },
			}
			for range 6 {
				f.clock.Advance(time.Second)
				w.check(f.clock.Now())
			}
			sameLines(t, "events", eventLines(f.evlog), c.events)
			mu.Lock()
			defer mu.Unlock()
			if stoppedLoad != c.stopLoad || stoppedTimeline != c.stopTimeline {
				t.Errorf("load stopped %v, timeline stopped %v; want %v, %v", stoppedLoad, stoppedTimeline, c.stopLoad, c.stopTimeline)
			}
			if !c.aborted {
				if abortErr != nil {
					t.Errorf("aborted: %v", abortErr)
				}
				return
			}
			if exitcode.Code(abortErr) != exitcode.CouldNotRun || abortErr.Error() != "aborted by stop condition "+detail+"abort" {
				t.Fatalf("abort error %v (exit %d)", abortErr, exitcode.Code(abortErr))
			}
			// The run records the abort (finish: Record.Aborted); its record
			// exits 3 and its summary says why.
			rec := &record.Run{Scenario: &scenario.Scenario{Metadata: scenario.Metadata{Name: "drill"}}, Plan: &plan.Plan{Duration: 10 * time.Second},
				Events: f.evlog.Events(), Cleanup: record.Cleanup{Verified: true}, Aborted: abortErr.Error()}
			code, why := rec.Decide()
			if code != exitcode.CouldNotRun || why != "the run could not be carried out: aborted by stop condition "+detail+"abort" {
				t.Errorf("Decide() = %d %q", code, why)
			}
			rec.ExitCode = code
			var sum strings.Builder
			if err := report.Summary(&sum, rec); err != nil {
				t.Fatal(err)
			}
			if want := "ABORTED   aborted by stop condition " + detail + "abort"; !strings.Contains(sum.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, sum.String())
			}
		})
	}
}

// TestStopWatcherTicks: run checks once a second on its clock until its
// context ends; without conditions it returns at once.
func TestStopWatcherTicks(t *testing.T) {
	(&stopWatcher{clock: &fakeClock{t: t}}).run(context.Background())

	clock := &fakeClock{t: t}
	checks := make(chan time.Duration, 10)
	w := &stopWatcher{clock: clock, log: slog.New(slog.DiscardHandler), evlog: &event.Log{},
		conds: []scenario.StopCondition{{Name: "c", Stream: "orders", ErrorRateAbove: 0.5, For: scenario.Duration{Duration: time.Second}}},
		live: func() []load.StreamLive {
			checks <- clock.Now()
			return nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	clock.waitPending(1)
	for i := 1; i <= 3; i++ {
		clock.Advance(time.Second)
		if at := <-checks; at != time.Duration(i)*time.Second {
			t.Errorf("check %d at %s, want %ds", i, at, i)
		}
	}
	cancel()
	<-done
	if n := clock.pending(); n != 0 {
		t.Errorf("%d timers left running", n)
	}
}
