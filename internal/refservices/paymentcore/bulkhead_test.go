package paymentcore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func mustBulkhead(t *testing.T, cfg BulkheadConfig) *Bulkhead {
	t.Helper()
	b, err := NewBulkhead(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewBulkheadRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []BulkheadConfig{
		{Name: "a", Workers: 0},
		{Name: "b", Workers: 1, Queue: -1},
		{Name: "c", Workers: 1, Queue: 2},
	} {
		if _, err := NewBulkhead(cfg); err == nil {
			t.Errorf("NewBulkhead(%+v) = nil error, want one", cfg)
		}
	}
}

// TestZeroQueueRejectsAtOnce: INV-BH-02, a full zero-queue bulkhead
// rejects without waiting, and counts the rejection.
func TestZeroQueueRejectsAtOnce(t *testing.T) {
	t.Parallel()
	b := mustBulkhead(t, BulkheadConfig{Name: "tax", Workers: 2})
	p1, err1 := b.Acquire(context.Background(), 0)
	p2, err2 := b.Acquire(context.Background(), 0)
	if err1 != nil || err2 != nil {
		t.Fatalf("Acquire with free workers: %v, %v", err1, err2)
	}
	if _, err := b.Acquire(context.Background(), 0); !errors.Is(err, ErrSaturated) {
		t.Fatalf("Acquire on a full zero-queue bulkhead = %v, want ErrSaturated", err)
	}
	if st := b.Stats(0); st.Active != 2 || st.Rejected != 1 || st.Admitted != 2 {
		t.Errorf("Stats = %+v, want 2 active, 2 admitted, 1 rejected", st)
	}
	if s := b.State(); s != StateSaturated {
		t.Errorf("State = %s, want SATURATED", s)
	}
	p1.Release()
	p2.Release()
	if st := b.Stats(0); st.Active != 0 {
		t.Errorf("Active after release = %d, want 0", st.Active)
	}
}

// TestQueueIsFIFO: queued requests get workers in arrival order.
func TestQueueIsFIFO(t *testing.T) {
	t.Parallel()
	b := mustBulkhead(t, BulkheadConfig{Name: "auth", Workers: 1, Queue: 3, QueueTimeout: time.Minute, Tags: 2})
	first, err := b.Acquire(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := b.Acquire(context.Background(), 1)
			if err != nil {
				t.Errorf("queued Acquire %d: %v", i, err)
				return
			}
			order <- i
			p.Release()
		}()
		// Wait until request i is queued before sending the next.
		waitFor(t, func() bool { return b.Stats(1).Queued == i+1 })
	}
	if _, err := b.Acquire(context.Background(), 0); !errors.Is(err, ErrSaturated) {
		t.Errorf("Acquire with a full queue = %v, want ErrSaturated", err)
	}
	first.Release()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Errorf("granted request %d, want %d (FIFO)", got, want)
		}
		want++
	}
	if st := b.Stats(1); st.Admitted != 3 || st.Active != 0 || st.Queued != 0 {
		t.Errorf("tag 1 stats = %+v, want 3 admitted, none active or queued", st)
	}
}

func TestQueueTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	b := mustBulkhead(t, BulkheadConfig{Name: "auth", Workers: 1, Queue: 2, QueueTimeout: 20 * time.Millisecond})
	p, err := b.Acquire(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if _, err := b.Acquire(context.Background(), 0); !errors.Is(err, ErrSaturated) {
		t.Errorf("Acquire past the queue timeout = %v, want ErrSaturated", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a cancelled ctx = %v, want context.Canceled", err)
	}
	if st := b.Stats(0); st.Queued != 0 || st.Rejected != 1 {
		t.Errorf("Stats = %+v, want nothing queued and 1 rejection (timeouts count, cancels do not)", st)
	}
}

// TestStateTransitions: MC-ST-01 NORMAL -> SATURATED -> RECOVERING ->
// NORMAL, with the 10 s hold on a fake clock, and a relapse.
func TestStateTransitions(t *testing.T) {
	t.Parallel()
	var seen []string
	b := mustBulkhead(t, BulkheadConfig{Name: "tax", Workers: 10, RecoveryHold: 10 * time.Second,
		OnTransition: func(_ string, from, to State) { seen = append(seen, from.String()+">"+to.String()) }})
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }

	var permits []Permit
	for range 10 {
		p, err := b.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, p)
	}
	if s := b.State(); s != StateSaturated {
		t.Fatalf("all workers busy, zero queue: state %s, want SATURATED", s)
	}
	// 7 of 10 busy: not below 60 %, still SATURATED.
	for range 3 {
		permits[0].Release()
		permits = permits[1:]
	}
	if s := b.State(); s != StateSaturated {
		t.Fatalf("70 %% busy: state %s, want SATURATED", s)
	}
	// 5 of 10: below 60 % -> RECOVERING.
	for range 2 {
		permits[0].Release()
		permits = permits[1:]
	}
	if s := b.State(); s != StateRecovering {
		t.Fatalf("50 %% busy: state %s, want RECOVERING", s)
	}
	now = now.Add(9 * time.Second)
	b.Tick(now)
	if s := b.State(); s != StateRecovering {
		t.Fatalf("after 9 s low: state %s, want RECOVERING", s)
	}
	now = now.Add(time.Second)
	b.Tick(now)
	if s := b.State(); s != StateNormal {
		t.Fatalf("after 10 s low: state %s, want NORMAL", s)
	}
	// Relapse from RECOVERING: saturate, drop low, then fill again.
	for range 5 {
		p, err := b.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, p)
	}
	for range 6 {
		permits[0].Release()
		permits = permits[1:]
	}
	for range 6 {
		p, err := b.Acquire(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, p)
	}
	for _, p := range permits {
		p.Release()
	}
	want := []string{"NORMAL>SATURATED", "SATURATED>RECOVERING", "RECOVERING>NORMAL", "NORMAL>SATURATED", "SATURATED>RECOVERING", "RECOVERING>SATURATED", "SATURATED>RECOVERING"}
	if len(seen) != len(want) {
		t.Fatalf("transitions %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("transitions %v, want %v", seen, want)
		}
	}
}

// TestRecoveringTimerResets: climbing back to >= 60 % restarts the hold.
func TestRecoveringTimerResets(t *testing.T) {
	t.Parallel()
	b := mustBulkhead(t, BulkheadConfig{Name: "tax", Workers: 10, RecoveryHold: 10 * time.Second})
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	var ps []Permit
	for range 10 {
		p, _ := b.Acquire(context.Background(), 0)
		ps = append(ps, p)
	}
	for range 6 { // 4 busy: RECOVERING since t=0
		ps[0].Release()
		ps = ps[1:]
	}
	now = now.Add(8 * time.Second)
	for range 3 { // 7 busy: not low any more
		p, _ := b.Acquire(context.Background(), 0)
		ps = append(ps, p)
	}
	for range 3 { // low again from t=8 s
		ps[0].Release()
		ps = ps[1:]
	}
	now = now.Add(5 * time.Second) // t=13: only 5 s low
	b.Tick(now)
	if s := b.State(); s != StateRecovering {
		t.Fatalf("state %s after a reset hold, want RECOVERING", s)
	}
	now = now.Add(5 * time.Second)
	b.Tick(now)
	if s := b.State(); s != StateNormal {
		t.Fatalf("state %s after 10 s low since the reset, want NORMAL", s)
	}
	for _, p := range ps {
		p.Release()
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	bh, _ := NewBulkhead(BulkheadConfig{Name: "auth", Workers: 75, Queue: 10, QueueTimeout: time.Second})
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := bh.Acquire(ctx, 0)
			if err == nil {
				p.Release()
			}
		}
	})
}
