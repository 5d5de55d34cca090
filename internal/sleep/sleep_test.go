package sleep

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	if !For(ctx, 20*time.Millisecond) {
		t.Fatal("For returned false with a live context")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("For(20ms) returned after %v", took)
	}
	if !For(ctx, 0) || !For(ctx, -time.Second) {
		t.Fatal("For(<=0) returned false with a live context")
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if For(done, 0) {
		t.Fatal("For(0) returned true with an ended context")
	}
	start = time.Now()
	if For(done, time.Hour) {
		t.Fatal("For(1h) returned true with an ended context")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("For with an ended context took %v", took)
	}
}

// fakeTimer fires when the test says so.
type fakeTimer struct {
	c       chan time.Time
	stopped bool
}

func (f *fakeTimer) C() <-chan time.Time { return f.c }
func (f *fakeTimer) Stop() bool          { f.stopped = true; return true }

func TestOn(t *testing.T) {
	var made []time.Duration
	ft := &fakeTimer{c: make(chan time.Time, 1)}
	ft.c <- time.Time{}
	newTimer := func(d time.Duration) Timer { made = append(made, d); return ft }
	if !On(context.Background(), 5*time.Second, newTimer) {
		t.Fatal("On returned false when the timer fired")
	}
	if len(made) != 1 || made[0] != 5*time.Second || !ft.stopped {
		t.Fatalf("timers made %v, stopped %v; want one of 5s, stopped", made, ft.stopped)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if On(ctx, time.Second, func(time.Duration) Timer { return &fakeTimer{c: make(chan time.Time)} }) {
		t.Fatal("On returned true when the context ended first")
	}
}
