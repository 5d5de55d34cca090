package localenv

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/clock"
)

// fakeClock is a [clock.Clock] that moves only when the test advances it. Timers
// and tickers fire, in deadline order, when an advance passes their
// deadline; like the real ones their channels hold one value and a tick a
// busy receiver misses is dropped.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at      time.Time
	period  time.Duration // 0: a timer
	ch      chan time.Time
	stopped bool
}

func newFakeClock(t0 time.Time) *fakeClock { return &fakeClock{now: t0} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) add(d, period time.Duration) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{at: f.now.Add(d), period: period, ch: make(chan time.Time, 1)}
	if d <= 0 && period == 0 {
		w.ch <- f.now
		w.stopped = true
		return w
	}
	f.waiters = append(f.waiters, w)
	return w
}

func (f *fakeClock) NewTimer(d time.Duration) clock.Timer { return &fakeTimer{f, f.add(d, 0)} }

func (f *fakeClock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("non-positive ticker period")
	}
	return &fakeTicker{f, f.add(d, d)}
}

func (f *fakeClock) stop(w *fakeWaiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := !w.stopped
	w.stopped = true
	return was
}

type fakeTimer struct {
	f *fakeClock
	w *fakeWaiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.ch }
func (t *fakeTimer) Stop() bool          { return t.f.stop(t.w) }

type fakeTicker struct {
	f *fakeClock
	w *fakeWaiter
}

func (t *fakeTicker) C() <-chan time.Time { return t.w.ch }
func (t *fakeTicker) Stop()               { t.f.stop(t.w) }

// advanceTo moves the clock to t, firing every timer and tick due on the
// way in deadline order.
func (f *fakeClock) advanceTo(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		var next *fakeWaiter
		for _, w := range f.waiters {
			if !w.stopped && !w.at.After(t) && (next == nil || w.at.Before(next.at)) {
				next = w
			}
		}
		if next == nil {
			break
		}
		f.now = next.at
		select {
		case next.ch <- next.at:
		default:
		}
		if next.period > 0 {
			next.at = next.at.Add(next.period)
		} else {
			next.stopped = true
		}
	}
	f.now = t
	live := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.stopped {
			live = append(live, w)
		}
	}
	f.waiters = live
}

// pending returns the deadlines of the live timers and tickers, sorted.
func (f *fakeClock) pending() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Time
	for _, w := range f.waiters {
		if !w.stopped {
			out = append(out, w.at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// waitPending waits (real time, generous) until a timer or ticker is due at
// t0+at, i.e. until the code under test has scheduled its next step there.
func (f *fakeClock) waitPending(tb testing.TB, t0 time.Time, at time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		ps := f.pending()
		for _, p := range ps {
			if p.Sub(t0) == at {
				return
			}
		}
		if time.Now().After(deadline) {
			var got []string
			for _, p := range ps {
				got = append(got, p.Sub(t0).String())
			}
			tb.Fatalf("nothing scheduled at t0+%s; pending: [%s]", at, strings.Join(got, " "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFakeClock(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	f := newFakeClock(t0)
	tm := f.NewTimer(3 * time.Second)
	tk := f.NewTicker(2 * time.Second)
	f.advanceTo(t0.Add(5 * time.Second))
	var got []string
	for _, c := range []<-chan time.Time{tk.C(), tm.C(), tk.C()} {
		select {
		case v := <-c:
			got = append(got, fmt.Sprint(v.Sub(t0)))
		default:
			got = append(got, "none")
		}
	}
	// The tick at 4s was dropped: the channel still held the one at 2s.
	if want := "2s,3s,none"; strings.Join(got, ",") != want {
		t.Errorf("got %s, want %s", strings.Join(got, ","), want)
	}
	if p := f.pending(); len(p) != 1 || p[0].Sub(t0) != 6*time.Second {
		t.Errorf("pending %v, want the ticker at 6s", p)
	}
	tk.Stop()
	if p := f.pending(); len(p) != 0 {
		t.Errorf("pending after Stop: %v", p)
	}
}
