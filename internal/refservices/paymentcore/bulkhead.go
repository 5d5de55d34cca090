package paymentcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// State is a bulkhead's compartment state (BULKHEAD-PAY-001 MC-ST-01).
type State int

// States, in the order of MC-ST-01.
const (
	// StateNormal: admitting; entered at start and after RECOVERING held.
	StateNormal State = iota
	// StateSaturated: every worker busy and the queue full (or a request
	// was just rejected); new arrivals are rejected at once.
	StateSaturated
	// StateRecovering: active workers dropped below 60 % of capacity after
	// a saturation; back to NORMAL once that held for RecoveryHold (10 s).
	StateRecovering
)

// States lists every state, for metrics.
var States = []State{StateNormal, StateSaturated, StateRecovering}

// String returns NORMAL, SATURATED or RECOVERING.
func (s State) String() string {
	switch s {
	case StateNormal:
		return "NORMAL"
	case StateSaturated:
		return "SATURATED"
	case StateRecovering:
		return "RECOVERING"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// recoveringBelow is the active fraction under which a saturated bulkhead
// counts as recovering (MC-ST-01: 60 %).
const recoveringBelow = 0.6

// ErrSaturated is returned by [Bulkhead.Acquire] when every worker is busy
// and the queue is full, or a queued request waited its QueueTimeout.
var ErrSaturated = errors.New("bulkhead saturated")

// BulkheadConfig sizes a [Bulkhead].
type BulkheadConfig struct {
	// Name labels the bulkhead in logs.
	Name string
	// Workers is the number of permits (concurrent executions); >= 1.
	Workers int
	// Queue is the FIFO queue's capacity; 0 means no queue: a request
	// that finds every worker busy is rejected at once (INV-BH-02).
	Queue int
	// QueueTimeout is the longest a queued request waits for a worker
	// before it is rejected; > 0 when Queue > 0.
	QueueTimeout time.Duration
	// RecoveryHold is how long active workers must stay below 60 % before
	// RECOVERING turns NORMAL; default 10s (MC-ST-01).
	RecoveryHold time.Duration
	// Tags is the number of request classes counted separately (lanes
	// sharing one bulkhead in the naive build); default 1.
	Tags int
	// OnTransition, if set, is called after each state change, outside the
	// bulkhead's lock.
	OnTransition func(name string, from, to State)
}

// TagStats are a tag's counters.
type TagStats struct {
	// Active is the number of permits held now.
	Active int
	// Queued is the number of requests waiting now.
	Queued int
	// Admitted counts permits granted since start.
	Admitted uint64
	// Rejected counts [ErrSaturated] answers since start.
	Rejected uint64
}

type waiter struct {
	tag     int
	ready   chan struct{} // closed when granted
	granted bool          // guarded by Bulkhead.mu
}

// Bulkhead is a concurrency limit with a bounded FIFO queue, counted per
// tag, with the MC-ST-01 state machine. Admission depends only on permits
// and the queue; the state is the observable signal. Safe for concurrent
// use.
type Bulkhead struct {
	cfg BulkheadConfig
	now func() time.Time

	mu       sync.Mutex
	active   int
	queue    []*waiter
	state    State
	lowSince time.Time // RECOVERING: since when active < 60 % (zero: not low)
	tags     []TagStats
	changes  []uint64 // transitions into each state

	blocked atomic.Int64 // workers waiting on a remote call now (see Blocked)
}

// NewBulkhead returns a Bulkhead in state NORMAL. It returns an error when
// cfg is invalid.
func NewBulkhead(cfg BulkheadConfig) (*Bulkhead, error) {
	if cfg.Workers < 1 {
		return nil, fmt.Errorf("bulkhead %s: workers must be >= 1, got %d", cfg.Name, cfg.Workers)
	}
	if cfg.Queue < 0 {
		return nil, fmt.Errorf("bulkhead %s: queue must be >= 0, got %d", cfg.Name, cfg.Queue)
	}
	if cfg.Queue > 0 && cfg.QueueTimeout <= 0 {
		return nil, fmt.Errorf("bulkhead %s: queue timeout must be > 0 with a queue", cfg.Name)
	}
	if cfg.RecoveryHold <= 0 {
		cfg.RecoveryHold = 10 * time.Second
	}
	if cfg.Tags < 1 {
		cfg.Tags = 1
	}
	return &Bulkhead{cfg: cfg, now: time.Now, tags: make([]TagStats, cfg.Tags), changes: make([]uint64, len(States))}, nil
}

// Permit is a held worker; release it exactly once with [Permit.Release].
type Permit struct {
	b   *Bulkhead
	tag int
}

// Release returns the worker: the oldest queued request gets it, else it
// becomes free.
func (p Permit) Release() { p.b.release(p.tag) }

// Acquire takes a worker for a request of class tag (0 <= tag < Tags). If
// none is free it queues (FIFO) when the queue has room, up to QueueTimeout
// or until ctx is done; otherwise it fails at once with [ErrSaturated]
// (no allocation, no waiting). A request whose ctx ends while queued gets
// ctx's error.
func (b *Bulkhead) Acquire(ctx context.Context, tag int) (Permit, error) {
	b.mu.Lock()
	if b.active < b.cfg.Workers && len(b.queue) == 0 {
		b.active++
		b.tags[tag].Active++
		b.tags[tag].Admitted++
		from, to, changed := b.evalLocked(b.now())
		b.mu.Unlock()
		b.notify(from, to, changed)
		return Permit{b, tag}, nil
	}
	if len(b.queue) >= b.cfg.Queue {
		b.tags[tag].Rejected++
		from, to, changed := b.setLocked(StateSaturated)
		b.mu.Unlock()
		b.notify(from, to, changed)
		return Permit{}, ErrSaturated
	}
	w := &waiter{tag: tag, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.tags[tag].Queued++
	from, to, changed := b.evalLocked(b.now())
	b.mu.Unlock()
	b.notify(from, to, changed)

	t := time.NewTimer(b.cfg.QueueTimeout)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return Permit{b, tag}, nil
	case <-t.C:
		err = ErrSaturated
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	b.mu.Lock()
	if w.granted { // granted while we gave up: keep it
		b.mu.Unlock()
		return Permit{b, tag}, nil
	}
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	b.tags[tag].Queued--
	changed = false
	if errors.Is(err, ErrSaturated) {
		b.tags[tag].Rejected++
		from, to, changed = b.setLocked(StateSaturated)
	}
	b.mu.Unlock()
	b.notify(from, to, changed)
	return Permit{}, err
}

func (b *Bulkhead) release(tag int) {
	b.mu.Lock()
	b.tags[tag].Active--
	if len(b.queue) > 0 {
		w := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		w.granted = true
		b.tags[w.tag].Queued--
		b.tags[w.tag].Active++
		b.tags[w.tag].Admitted++
		close(w.ready)
	} else {
		b.active--
	}
	from, to, changed := b.evalLocked(b.now())
	b.mu.Unlock()
	b.notify(from, to, changed)
}

// Tick advances the time-based transition RECOVERING -> NORMAL; call it a
// few times a second.
func (b *Bulkhead) Tick(now time.Time) {
	b.mu.Lock()
	from, to, changed := b.evalLocked(now)
	b.mu.Unlock()
	b.notify(from, to, changed)
}

// evalLocked applies MC-ST-01 to the current counts.
func (b *Bulkhead) evalLocked(now time.Time) (State, State, bool) {
	full := b.active >= b.cfg.Workers && len(b.queue) >= b.cfg.Queue
	low := float64(b.active) < recoveringBelow*float64(b.cfg.Workers)
	switch b.state {
	case StateNormal:
		if full {
			return b.setLocked(StateSaturated)
		}
	case StateSaturated:
		if low {
			b.lowSince = now
			return b.setLocked(StateRecovering)
		}
	case StateRecovering:
		switch {
		case full:
			return b.setLocked(StateSaturated)
		case !low:
			b.lowSince = time.Time{}
		case b.lowSince.IsZero():
			b.lowSince = now
		case now.Sub(b.lowSince) >= b.cfg.RecoveryHold:
			return b.setLocked(StateNormal)
		}
	}
	return b.state, b.state, false
}

func (b *Bulkhead) setLocked(s State) (State, State, bool) {
	from := b.state
	if from == s {
		return from, s, false
	}
	b.state = s
	b.changes[s]++
	if s != StateRecovering {
		b.lowSince = time.Time{}
	}
	return from, s, true
}

func (b *Bulkhead) notify(from, to State, changed bool) {
	if changed && b.cfg.OnTransition != nil {
		b.cfg.OnTransition(b.cfg.Name, from, to)
	}
}

// State returns the current state.
func (b *Bulkhead) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Transitions returns how often the bulkhead entered s.
func (b *Bulkhead) Transitions(s State) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changes[s]
}

// Stats returns tag's counters.
func (b *Bulkhead) Stats(tag int) TagStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tags[tag]
}

// Workers is the number of permits.
func (b *Bulkhead) Workers() int { return b.cfg.Workers }

// QueueCapacity is the queue's capacity.
func (b *Bulkhead) QueueCapacity() int { return b.cfg.Queue }

// Blocked marks one of the bulkhead's workers as blocked on a remote call
// (the tax API) until the returned func is called, exactly once. A
// worker so blocked still holds its permit; [Bulkhead.BlockedWorkers]
// counts it (MC-FM-01.4: "0 blocked threads in bulkhead_card_auth").
func (b *Bulkhead) Blocked() (done func()) {
	b.blocked.Add(1)
	return func() { b.blocked.Add(-1) }
}

// BlockedWorkers is how many of the bulkhead's workers are blocked on a
// remote call now (see [Bulkhead.Blocked]).
func (b *Bulkhead) BlockedWorkers() int64 { return b.blocked.Load() }
