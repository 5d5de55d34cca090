// Package load drives drill's open-model load: several streams at once on
// the run's one clock, each at an exact rate (constant, linear ramp or
// steps) on the vegeta/v12 library, measured without coordinated omission.
//
// Hit n of a stream is due at its schedule's time At(n) (the integral of
// the rate, as vegeta's pacers define it). Its latency counts from that
// intended time, not from when a worker picked it up, so a generator that
// falls behind shows the wait in the figures; the lag (actual − intended
// send time) goes into each bucket's Lag histogram, and a request sent
// later than the stream's lag budget allows counts in the bucket's Late.
// Whether a stream kept to its schedule is measure's lag rule
// ([measure.LagBudget]; a hit never sent is late too): [Engine.Validity]
// applies it to each stream's whole span and returns an error wrapping
// [ErrBehindSchedule] when it did not (drill load then exits 4); drill
// run applies the same rule to the recorded seconds of its judged span
// (internal/record's CheckLag).
//
// Results are bucketed per stream by intended send time into 1 s buckets
// aligned to t=0 of the clock (internal/measure); nothing keeps every
// result. With [Options.Seconds] (drill run's journal) each second is
// handed over once it can no longer change and the engine keeps only the
// open seconds and the last few closed ones, so its memory does not grow
// with run length; without it, closed seconds are packed (a few KB each)
// and kept.
package load

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// ErrBehindSchedule is wrapped by [Engine.Validity] when a stream's load
// generator fell behind its schedule beyond its lag budget (docs/DESIGN.md §7).
var ErrBehindSchedule = errors.New("load generator behind schedule")

// Defaults applied to zero fields of a stream.
const (
	DefaultTimeout = 5 * time.Second
	// DefaultWorkerCap caps the default MaxWorkers (1.25 × peak rate ×
	// timeout + 64).
	DefaultWorkerCap = 10000
	// DefaultGrace is how long after its duration a stream may still send
	// hits it owes; hits not sent by then count as missed (late).
	DefaultGrace = time.Second
	// LateHookAfter is the late request that calls Options.OnLate: enough
	// that a single straggler does not.
	LateHookAfter = 100
	// DefaultAbortLag: a stream whose dispatch lag reaches it stops sending.
	// A generator that far behind is collapsing (each missed tick adds a
	// worker and a connection, which slows it further); the run is invalid
	// whatever happens next, so carrying on would only load the machine and
	// the system under test with a connection storm.
	DefaultAbortLag = 2 * time.Second
)

// Options tune the engine; the zero value is ready to use.
type Options struct {
	// Dir resolves relative targetsFile paths (the scenario's directory).
	Dir string
	// RunID prefixes the {{.ID}} of body templates; default 8 random hex digits.
	RunID string
	// BucketWidth is the measurement bucket width; default 1 s.
	BucketWidth time.Duration
	// WorkerCap caps the default MaxWorkers of a stream; default DefaultWorkerCap.
	WorkerCap int
	// MaxBody is how many response body bytes vegeta keeps per result
	// (they are discarded at once; BytesIn still counts every byte);
	// default 0. A stream with a json check keeps at least
	// scenario.CheckBodyLimit+1 bytes (64 KiB and one byte: one more than
	// the limit tells a body cut at it), whatever MaxBody says; the others
	// keep MaxBody.
	MaxBody int64
	// Grace: see DefaultGrace.
	Grace time.Duration
	// AbortLag: see DefaultAbortLag; negative disables the guard.
	AbortLag time.Duration
	// MaxDials caps the connections a stream opens at once; default 32.
	MaxDials int
	// OnLate, when set, is called at most once per stream, in a goroutine
	// of its own, when the stream's late requests (sent later than its lag
	// budget allows) first reach LateHookAfter: the moment to save a
	// runtime trace of drill (the hidden --trace-late flag). at is that
	// request's intended send time (clock offset).
	OnLate func(stream string, at time.Duration)
	// Seconds, when set, receives every stream's seconds as they close (a
	// second closes once no result can still arrive for it: the stream's
	// timeout plus 2 s after it ends), each exactly once and contiguous
	// from the stream's first second to its last, with Intended set; then,
	// rarely, increments of a second that got results after it closed
	// (Intended 0), which readers merge. The engine then keeps only the
	// open seconds and the last few closed ones (for Live), so its memory
	// does not grow with run length, and [Engine.Series] returns only what
	// it still holds: read the seconds back from where Seconds put them.
	// A write error is logged, the run goes on (seconds are dropped all
	// the same), and [Engine.SecondsErr] returns the first one. nil: every
	// second stays in memory, packed.
	Seconds SecondSink
	// Routers routes the requests whose URL host (host:port) is a key
	// in-process instead of dialling that address: the local runtime's
	// Services, whose listener hop the engine then skips. nil: none.
	Routers map[string]Router
	// Partition, when active (Count > 1), makes this engine worker Index of
	// Count: every stream sends only the hits of its schedule whose
	// sequence number is Index mod Count, and counts its schedule from its
	// exact start offset on the clock rather than from the moment this
	// process got there, so that Count engines whose clocks share t=0
	// together send exactly the one-process schedule. A worker that
	// starts late sends the hits already due at once, and their lag shows
	// it. Body templates' {{.Seq}} and {{.ID}} carry the whole schedule's
	// sequence number. Streams at rate 0 (as fast as possible) are refused.
	Partition Partition
}

// Router sends a request on behalf of a Service address (see
// [Options.Routers]): it picks the backend, rewrites the request's URL to it
// and sends it with base, the stream's transport (its connection pools,
// caps and timeouts). It answers with the Service's own responses (503 with
// no backend, 502 on a backend error) and returns an error only when the
// request's context ended. Safe for concurrent use.
type Router interface {
	RoundTripVia(base http.RoundTripper, req *http.Request) (*http.Response, error)
}

// ConnRouter is a [Router] that can balance per connection, as kube-proxy
// does. When BalancesPerConnection is true the engine sends the Service's
// requests with the stream's transport as they are and opens each of its
// connections with DialVia, which picks the endpoint and dials it with
// dial (the stream's own dialer, with its dial cap): requests on a
// kept-alive connection keep reaching the endpoint it was opened to.
// DialVia fails as a refused connection when no endpoint is ready. Safe
// for concurrent use.
type ConnRouter interface {
	Router
	BalancesPerConnection() bool
	DialVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error)
}

// perRequest are the routers of rs that balance per request (every
// router that is not a per-connection [ConnRouter]).
func perRequest(rs map[string]Router) map[string]Router {
	out := make(map[string]Router, len(rs))
	for addr, r := range rs {
		if cr, ok := r.(ConnRouter); !ok || !cr.BalancesPerConnection() {
			out[addr] = r
		}
	}
	return out
}

// connRouters are the routers of rs that balance per connection, by
// address; nil when none does.
func connRouters(rs map[string]Router) map[string]ConnRouter {
	var out map[string]ConnRouter
	for addr, r := range rs {
		if cr, ok := r.(ConnRouter); ok && cr.BalancesPerConnection() {
			if out == nil {
				out = map[string]ConnRouter{}
			}
			out[addr] = cr
		}
	}
	return out
}

// SecondSink receives closed seconds (see [Options.Seconds]). b is only
// lent for the call: the engine reuses it afterwards. WriteSecond is called
// from one goroutine at a time.
type SecondSink interface {
	WriteSecond(stream string, b *measure.Bucket) error
}

// Engine runs a set of streams once. Create it with [New]; call Run once.
// Series, Live and Validity are safe to call at any time, also during Run.
type Engine struct {
	clock   *event.Clock
	opts    Options
	log     *slog.Logger
	streams []*stream
	ran     atomic.Bool

	secondsMu  sync.Mutex
	secondsErr error
}

// stream states.
const (
	statePending int32 = iota
	stateRunning
	stateDone
	stateSkipped // ctx ended before its start offset
)

type stream struct {
	name       string
	spec       scenario.Stream
	start      time.Duration // clock offset the stream should start at
	dur        time.Duration
	sched      schedule // nil: as fast as maxWorkers allow
	targets    []vegeta.Target
	tpls       []*bodyTemplate
	retry      retryPolicy
	timeout    time.Duration
	maxWorkers uint64
	budget     measure.LagBudget // defaults applied
	idPrefix   string
	part       Partition // this engine's share of the schedule
	clock      *event.Clock
	rec        *recorder
	base       *http.Transport // https, and streams with maxConnections
	lean       *h1Transport    // http:// targets; nil for streams with maxConnections
	client     *http.Client
	// checks are the stream's response checks; nil when it has none.
	checks *checkSet
	// maxBody is how many body bytes vegeta keeps per result (bytes; see
	// Options.MaxBody).
	maxBody int64

	state    atomic.Int32
	anchor   atomic.Int64 // clock offset (ns) the schedule counts from
	endRel   atomic.Int64 // intended end relative to anchor (ns); set when stopped early
	inflight atomic.Int64
	results  atomic.Int64
	lateN    atomic.Int64
	maxSeq   atomic.Uint64 // 1 + the highest sequence number recorded
	// capped counts watch ticks (100 ms) on which the stream was behind
	// its schedule with nearly all maxWorkers waiting for responses: the
	// worker cap, not the generator's speed, held hits back.
	capped atomic.Int64

	onLate    func(stream string, at time.Duration) // Options.OnLate
	abortLag  time.Duration
	abort     chan struct{} // closed when the lag reached abortLag
	abortOnce sync.Once
	abortedAt atomic.Int64 // clock offset (ns) of the abort; 0: none
}

// New validates the streams (URLs already expanded by the runner) and
// prepares them; t=0 of clock is when load starts. Errors name the stream
// and what is wrong (bad rate, no targets, unreadable targets file, bad
// template); nothing is started.
func New(clock *event.Clock, streams []scenario.Stream, opts Options, log *slog.Logger) (*Engine, error) {
	if clock == nil {
		return nil, errors.New("new load engine: nil clock")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.BucketWidth <= 0 {
		opts.BucketWidth = time.Second
	}
	if opts.WorkerCap <= 0 {
		opts.WorkerCap = DefaultWorkerCap
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.MaxDials <= 0 {
		opts.MaxDials = 32
	}
	if opts.AbortLag == 0 {
		opts.AbortLag = DefaultAbortLag
	}
	if opts.MaxBody < 0 {
		opts.MaxBody = 0
	}
	if opts.RunID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.RunID = hex.EncodeToString(b[:])
	}
	if err := opts.Partition.Validate(); err != nil {
		return nil, fmt.Errorf("new load engine: %w", err)
	}
	e := &Engine{clock: clock, opts: opts, log: log}
	seen := map[string]bool{}
	for i, st := range streams {
		if st.Name == "" {
			return nil, fmt.Errorf("streams[%d]: name is required", i)
		}
		if seen[st.Name] {
			return nil, fmt.Errorf("streams[%d]: duplicate stream name %q", i, st.Name)
		}
		seen[st.Name] = true
		s, err := e.prepare(st)
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", st.Name, err)
		}
		e.streams = append(e.streams, s)
	}
	return e, nil
}

func (e *Engine) prepare(st scenario.Stream) (*stream, error) {
	s := &stream{name: st.Name, spec: st, start: st.Start.D(), dur: st.Duration.D(), clock: e.clock,
		abortLag: e.opts.AbortLag, abort: make(chan struct{}), onLate: e.opts.OnLate}
	if s.dur == 0 && len(st.Steps) > 0 {
		for _, step := range st.Steps {
			s.dur += step.For.D()
		}
	}
	if s.dur <= 0 {
		return nil, errors.New("needs a positive duration")
	}
	var err error
	if s.sched, err = newSchedule(st, s.dur); err != nil {
		return nil, err
	}
	if e.opts.Partition.Active() {
		if s.sched, err = newPartSchedule(s.sched, e.opts.Partition); err != nil {
			return nil, err
		}
	}
	s.part = e.opts.Partition
	reqs, err := NewRequests(st, e.opts.Dir)
	if err != nil {
		return nil, err
	}
	s.targets, s.tpls = reqs.targets, reqs.tpls
	if s.retry, err = newRetryPolicy(st.Retry); err != nil {
		return nil, err
	}
	s.timeout = st.Timeout.D()
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.budget, err = streamLagBudget(st); err != nil {
		return nil, err
	}
	if st.MaxWorkers < 0 || st.MaxConnections < 0 {
		return nil, errors.New("maxWorkers and maxConnections must not be negative")
	}
	if st.MaxWorkers > 0 {
		s.maxWorkers = uint64(st.MaxWorkers)
	} else {
		// Enough workers for every request of a timeout's worth of load to be
		// in flight at once (so a stalled server does not stall the
		// schedule), capped so overload cannot collapse the generator. A
		// worker stays busy a little past its request's timeout (reading,
		// recording, waiting to be scheduled), so when every request times
		// out, exactly rate x timeout workers fall behind: 25% more, plus 64.
		peak := peakRate(s.sched, s.dur)
		n := int(math.Ceil(peak*s.timeout.Seconds()*1.25)) + 64
		s.maxWorkers = uint64(min(n, e.opts.WorkerCap))
	}
	s.idPrefix = e.opts.RunID + "-" + st.Name + "-"
	s.checks = newCheckSet(st)
	s.maxBody = e.opts.MaxBody
	if st.HasJSONCheck() {
		s.maxBody = max(s.maxBody, scenario.CheckBodyLimit+1)
	}
	s.rec = newRecorder(e.opts.BucketWidth, s.start)

	keepAlive := st.KeepAlive == nil || *st.KeepAlive
	// No TCP keep-alive probes: every request has its timeout and idle
	// connections close after IdleConnTimeout, so probes would find
	// nothing, while enabling them costs three or four setsockopt calls per
	// connection, which add up when a hanging server makes every request
	// open one (thousands a second; syscalls are dear on small VMs).
	dialer := &net.Dialer{Timeout: s.timeout, KeepAlive: -1}
	// At most maxDials connections being opened at once: a catch-up burst
	// then mostly waits for connections that free up in a millisecond
	// instead of opening one per request (a connection storm that starved
	// the generator and collapsed it in the benchmarks); a stalled server
	// still gets as many connections as the load needs, 32 at a time.
	dials := make(chan struct{}, e.opts.MaxDials)
	perConn := connRouters(e.opts.Routers)
	dial := func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		done := markDial(ctx)
		defer func() { done(err) }()
		// The lean transport's requests carry their deadline beside the
		// context, not in it (see transport.RoundTrip).
		deadline := requestDeadline(ctx)
		if err := acquire(ctx, dials, network, deadline); err != nil {
			return nil, err
		}
		defer func() { <-dials }()
		d := dialer
		if !deadline.IsZero() {
			dd := *dialer
			dd.Deadline = deadline
			d = &dd
		}
		if r := perConn[addr]; r != nil {
			return r.DialVia(ctx, d.DialContext)
		}
		return d.DialContext(ctx, network, addr)
	}
	s.base = &http.Transport{
		DialContext:         dial,
		MaxIdleConnsPerHost: int(min(s.maxWorkers, 10000)),
		MaxConnsPerHost:     st.MaxConnections,
		DisableKeepAlives:   !keepAlive,
		DisableCompression:  true,
		// Each connection's buffers are allocated (and zeroed) when it
		// opens, which a hung server makes thousands of times a second
		// (every timed-out request closes its connection): 1 KiB holds a
		// typical request's or response's head; longer heads and bodies
		// are read and written through them in pieces or directly.
		WriteBufferSize:     connBufferSize,
		ReadBufferSize:      connBufferSize,
		TLSHandshakeTimeout: s.timeout,
		IdleConnTimeout:     90 * time.Second,
	}
	if st.MaxConnections == 0 {
		// net/http's Transport enforces maxConnections (requests wait for
		// a connection); the lean one has no such cap.
		s.lean = &h1Transport{
			dial:        dial,
			keepAlive:   keepAlive,
			maxIdle:     s.base.MaxIdleConnsPerHost,
			idleTimeout: s.base.IdleConnTimeout,
			bufSize:     connBufferSize,
		}
	}
	s.client = &http.Client{
		// No Timeout here: the transport applies s.timeout itself (see
		// transport.RoundTrip).
		Transport: &transport{base: s.base, lean: s.lean, s: s, routers: perRequest(e.opts.Routers)},
		// Redirects are answers, not followed (3xx counts as OK).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// connBufferSize is the size of each connection's read and write buffers
// (bytes); net/http's default is 4 KiB.
const connBufferSize = 1 << 10

func peakRate(s schedule, dur time.Duration) float64 {
	if s == nil {
		return 0
	}
	peak := 0.0
	for i := 0; i <= 100; i++ {
		peak = max(peak, s.Rate(dur*time.Duration(i)/100))
	}
	if ps, ok := s.(*pieceSchedule); ok {
		for _, sg := range ps.segs {
			peak = max(peak, sg.r0, sg.r1)
		}
	}
	return peak
}

// Run starts every stream at its Start offset on the clock, runs it for
// its Duration, and returns when all have finished or ctx ended. When ctx
// ends, no new request is sent; requests in flight end within their
// timeout and are still recorded. Cancellation is not an error; Run
// returns an error only when called twice.
func (e *Engine) Run(ctx context.Context) error {
	if !e.ran.CompareAndSwap(false, true) {
		return errors.New("run load: engine already ran")
	}
	var wg sync.WaitGroup
	for _, s := range e.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.runStream(ctx, s)
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	// From here this goroutine packs closed seconds: measurement. The
	// caller's labels come back when Run returns.
	pprof.SetGoroutineLabels(cpuuse.Labelled(ctx, cpuuse.PartMeasurement))
	defer pprof.SetGoroutineLabels(ctx)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-all:
			for _, s := range e.streams {
				s.closeIdle()
			}
			if e.opts.Seconds != nil {
				e.closeSeconds(0, true)
			}
			return nil
		case <-tick.C:
			now := e.clock.Now()
			if e.opts.Seconds != nil {
				e.closeSeconds(now, false)
				continue
			}
			for _, s := range e.streams {
				// Every request ends within its timeout (retries included);
				// stragglers reopen a packed second.
				s.rec.pack(now - s.timeout - 2*time.Second)
			}
		}
	}
}

// closeSeconds hands every stream's closed seconds to Options.Seconds:
// those that ended before now minus the stream's timeout and 2 s (every
// request ends within its timeout, retries included), or, when final or
// the stream is done, all of them.
func (e *Engine) closeSeconds(now time.Duration, final bool) {
	w := e.opts.BucketWidth
	for _, s := range e.streams {
		st := s.state.Load()
		if st == statePending || st == stateSkipped {
			continue
		}
		anchor := time.Duration(s.anchor.Load())
		end := anchor + time.Duration(s.endRel.Load())
		first, last := floorDiv(anchor, w), floorDiv(end-1, w)+1
		upto := last
		if !final && st != stateDone {
			upto = min(last, floorDiv(now-s.timeout-2*time.Second, w))
		}
		cs := s.rec.closeSeconds(first, upto)
		for _, c := range cs {
			b := c.b
			switch {
			case s.sched == nil:
				b.Intended = b.Requests
			case c.increment:
				b.Intended = 0
			default:
				b.Intended = s.intendedIn(b.Start, b.Start+b.Width, anchor, end)
			}
			if err := e.opts.Seconds.WriteSecond(s.name, b); err != nil {
				e.secondsMu.Lock()
				if e.secondsErr == nil {
					e.secondsErr = fmt.Errorf("stream %q: %w", s.name, err)
					e.log.Error("could not write a closed second; the run's measurements will be incomplete", "stream", s.name, "err", err)
				}
				e.secondsMu.Unlock()
			}
		}
		s.rec.recycle(cs)
	}
}

// SecondsErr returns the first error Options.Seconds returned (nil: none):
// the seconds it failed to take are lost, so the run's measurements are
// incomplete.
func (e *Engine) SecondsErr() error {
	e.secondsMu.Lock()
	defer e.secondsMu.Unlock()
	return e.secondsErr
}

// HeldSeconds counts the per-second buckets the engine holds in memory
// now, over all streams (dense or packed): with Options.Seconds it stays
// bounded by the open seconds plus a few recent ones whatever the run's
// length.
func (e *Engine) HeldSeconds() int {
	n := 0
	for _, s := range e.streams {
		n += s.rec.held()
	}
	return n
}

func (e *Engine) runStream(ctx context.Context, s *stream) {
	log := e.log.With("stream", s.name)
	if wait := s.start - e.clock.Now(); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			s.state.Store(stateSkipped)
			return
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		s.state.Store(stateSkipped)
		return
	}
	atk := vegeta.NewAttacker(
		vegeta.Client(s.client),
		vegeta.Workers(min(s.maxWorkers, 10)),
		vegeta.MaxWorkers(s.maxWorkers),
		vegeta.MaxBody(s.maxBody),
	)
	tr := vegeta.NewStaticTargeter(s.targets...)
	now := e.clock.Now()
	anchor := now
	if s.part.Active() {
		// The shared schedule counts from the stream's exact start.
		anchor = s.start
	}
	s.anchor.Store(int64(anchor))
	s.endRel.Store(int64(s.dur))
	s.state.Store(stateRunning)
	if late := now - s.start; late > s.budget.LateAfter {
		log.Warn("stream started late", "by", late)
	}
	var results <-chan *vegeta.Result
	switch {
	case s.sched == nil:
		results = atk.Attack(tr, vegeta.ConstantPacer{}, s.dur, s.name)
	case s.part.Active():
		results = atk.Attack(tr, offsetPacer{inner: s.sched.Pacer(), offset: e.clock.Now() - anchor}, 0, s.name)
	default:
		results = atk.Attack(tr, s.sched.Pacer(), 0, s.name)
	}
	log.Info("stream started", "at", anchor, "duration", s.dur, "intended", s.total(), "maxWorkers", s.maxWorkers)

	finished := make(chan struct{})
	go func() {
		grace := time.NewTimer(s.dur + e.opts.Grace)
		defer grace.Stop()
		watch := time.NewTicker(100 * time.Millisecond)
		defer watch.Stop()
		for {
			select {
			case <-watch.C:
				// Workers all stuck means no result shows the lag: watch the
				// schedule's progress too.
				b := s.behind(e.clock.Now())
				if s.abortLag > 0 && b >= s.abortLag {
					s.triggerAbort(e.clock.Now())
				}
				if b > s.budget.LateAfter && 10*uint64(max(s.inflight.Load(), 0)) >= 9*s.maxWorkers {
					s.capped.Add(1)
				}
				continue
			case <-finished:
			case <-ctx.Done():
				// Hits due after now are no longer intended.
				s.endRel.Store(int64(min(e.clock.Now()-anchor, s.dur)))
				atk.Stop()
			case <-grace.C:
				// Owed: due and not sent. Requests in flight were sent (a
				// slow target holds them past the duration); they finish
				// within their timeout whatever Stop does.
				if owed := int64(s.total()) - s.results.Load() - s.inflight.Load(); owed > 0 {
					log.Warn("stream still owes hits after its duration; stopping it", "owed", owed, "inFlight", s.inflight.Load())
				}
				atk.Stop()
			case <-s.abort:
				log.Error("load generator collapsing: dispatch lag reached the abort threshold; stream stopped, measurement invalid",
					"abortLag", s.abortLag, "at", time.Duration(s.abortedAt.Load()))
				atk.Stop()
			}
			return
		}
	}()
	// Recording results into the per-second histograms is measurement;
	// vegeta's workers, started above, keep the caller's labels.
	pprof.SetGoroutineLabels(cpuuse.Labelled(ctx, cpuuse.PartMeasurement))
	for r := range results {
		s.record(r)
	}
	close(finished)
	// A hit already handed to a worker when ctx ended still went out: the
	// schedule then intended it too.
	if n := s.maxSeq.Load(); n > 0 && s.sched != nil {
		if last := s.sched.At(n - 1); last >= time.Duration(s.endRel.Load()) {
			s.endRel.Store(int64(last) + 1)
		}
	}
	// Free this stream's connections now (a stopped stream can hold
	// thousands after a burst), not when the last stream ends.
	s.closeIdle()
	s.state.Store(stateDone)
	log.Info("stream finished", "requests", s.results.Load(), "late", s.lateN.Load())
}

// closeIdle closes the stream's idle connections (both transports').
func (s *stream) closeIdle() {
	s.base.CloseIdleConnections()
	if s.lean != nil {
		s.lean.CloseIdleConnections()
	}
}

// total is the number of hits intended from the stream's start to its
// intended end (its duration, or when ctx ended).
func (s *stream) total() uint64 {
	if s.sched == nil {
		return uint64(s.results.Load())
	}
	return s.sched.Count(time.Duration(s.endRel.Load()) + 1)
}

// triggerAbort stops the stream once (collapse guard); at is a clock offset.
func (s *stream) triggerAbort(at time.Duration) {
	s.abortOnce.Do(func() {
		s.abortedAt.Store(int64(at))
		close(s.abort)
	})
}

// behind is how late the oldest hit not yet handed to the transport is
// at clock offset now (0 when on schedule or in the as-fast-as-possible
// mode).
func (s *stream) behind(now time.Duration) time.Duration {
	if s.sched == nil || s.state.Load() != stateRunning {
		return 0
	}
	next := uint64(s.results.Load() + s.inflight.Load())
	if next >= s.sched.Total() {
		return 0
	}
	return max(now-time.Duration(s.anchor.Load())-s.sched.At(next), 0)
}

// intendedOffset is the clock offset of hit seq's intended send time; in
// the as-fast-as-possible mode, now.
func (s *stream) intendedOffset(seq uint64, now time.Time) time.Duration {
	if s.sched == nil {
		return s.clock.Offset(now)
	}
	return time.Duration(s.anchor.Load()) + s.sched.At(seq)
}

// intendedWall is hit seq's intended send time as wall-clock time.
func (s *stream) intendedWall(seq uint64) time.Time {
	if s.sched == nil {
		return time.Now()
	}
	return s.clock.Start().Add(time.Duration(s.anchor.Load()) + s.sched.At(seq))
}

func (s *stream) record(r *vegeta.Result) {
	sent := s.clock.Offset(r.Timestamp)
	intended := sent
	if s.sched != nil {
		intended = time.Duration(s.anchor.Load()) + s.sched.At(r.Seq)
	}
	lag := max(sent-intended, 0)
	o := outcome{
		intended: intended,
		lag:      lag,
		latency:  s.clock.Offset(r.Timestamp.Add(r.Latency)) - intended,
		code:     int(r.Code),
		late:     lag > s.budget.LateAfter,
	}
	if o.code == 0 {
		o.errKind = classify(r.Error)
	} else if r.Headers != nil {
		o.retryAfter = r.Headers.Get("Retry-After") != ""
		// Who answered travels with the answer (the local Service's
		// marker header), whichever process sent the request; a map
		// lookup by the canonical key, no allocation.
		_, o.byService = r.Headers[measure.ServiceAnswerHeader]
	}
	if s.checks != nil && !o.byService {
		// The local Service's own answers are not the service's: its
		// claims are not checked on them (as they are not its shedding).
		o.checks = s.checks.eval(r)
	}
	if o.late {
		if s.lateN.Add(1) == LateHookAfter && s.onLate != nil {
			go s.onLate(s.name, intended)
		}
		if s.abortLag > 0 && lag >= s.abortLag {
			s.triggerAbort(sent)
		}
	}
	s.results.Add(1)
	for m := s.maxSeq.Load(); r.Seq+1 > m && !s.maxSeq.CompareAndSwap(m, r.Seq+1); m = s.maxSeq.Load() {
	}
	s.rec.record(o)
}

// Series returns each stream's per-second buckets (by intended send time,
// aligned to t=0), contiguous from the stream's first second to its last
// (with Options.Seconds: from the oldest second it still holds).
// Each call returns fresh copies (closed seconds with packed histograms, a
// few KB per bucket; open ones dense, ~450 KB): safe during Run (a snapshot; Intended then counts hits due so far) and
// after it.
func (e *Engine) Series() map[string]*measure.Series {
	out := make(map[string]*measure.Series, len(e.streams))
	w := e.opts.BucketWidth
	for _, s := range e.streams {
		ser := &measure.Series{Stream: s.name}
		out[s.name] = ser
		st := s.state.Load()
		if st == statePending || st == stateSkipped {
			continue
		}
		anchor := time.Duration(s.anchor.Load())
		end := anchor + time.Duration(s.endRel.Load())
		if st == stateRunning {
			end = min(end, e.clock.Now())
		}
		first := floorDiv(anchor, w)
		last := floorDiv(end-1, w) + 1
		if e.opts.Seconds != nil {
			lo, _ := s.rec.span()
			first = max(first, lo)
		}
		ser.Buckets = s.rec.snapshot(first, last)
		for _, b := range ser.Buckets {
			b.Intended = s.intendedIn(b.Start, b.Start+b.Width, anchor, end)
			if s.sched == nil {
				b.Intended = b.Requests
			}
		}
	}
	return out
}

// intendedIn counts hits due in [from, to) (clock offsets), up to end.
func (s *stream) intendedIn(from, to, anchor, end time.Duration) int64 {
	if s.sched == nil {
		return 0
	}
	clamp := func(t time.Duration) time.Duration { return min(max(t, anchor), end+1) - anchor }
	return int64(s.sched.Count(clamp(to))) - int64(s.sched.Count(clamp(from)))
}

// StreamLive is a stream's recent figures for progress display and stop
// conditions. Rates are req/s; latencies are from intended send times.
type StreamLive struct {
	Stream string
	// State is pending, running, done or skipped.
	State string
	// Window is the span the figures cover: the last whole seconds before
	// now, within the stream's own seconds (0: no whole second yet).
	Window time.Duration
	// IntendedRate and AchievedRate (completed requests) over Window, req/s.
	IntendedRate, AchievedRate float64
	// P50 and P99 latency over Window.
	P50, P99 time.Duration
	// Requests completed and Failures (transport errors + status >= 400) over Window.
	Requests, Failures int64
	// ErrorRate is Failures/Requests over Window, 0..1.
	ErrorRate float64
	// Shed counts the 503/429 responses the service gave over Window
	// (measure.Bucket.ShedCount: not those drill's local Service answered
	// itself).
	Shed int64
	// LagP99 is the dispatch lag p99 over Window.
	LagP99 time.Duration
	// InFlight is requests sent and not yet finished, now.
	InFlight int64
	// Behind is how late the next hit due is, now (0 on schedule).
	Behind time.Duration
	// Sent and Late are totals since the stream started.
	Sent, Late int64
}

var stateNames = map[int32]string{statePending: "pending", stateRunning: "running", stateDone: "done", stateSkipped: "skipped"}

// Live returns each stream's figures over the last window (rounded up to
// whole buckets, ending at the last whole second before now), in the
// order the streams were given.
func (e *Engine) Live(window time.Duration) []StreamLive {
	w := e.opts.BucketWidth
	if window < w {
		window = w
	}
	n := (window + w - 1) / w
	to := time.Duration(floorDiv(e.clock.Now(), w)) * w
	from := to - n*w
	out := make([]StreamLive, 0, len(e.streams))
	for _, s := range e.streams {
		st := s.state.Load()
		l := StreamLive{Stream: s.name, State: stateNames[st], Window: n * w, InFlight: s.inflight.Load(),
			Sent: s.results.Load(), Late: s.lateN.Load(), Behind: s.behind(e.clock.Now())}
		if st != statePending && st != stateSkipped {
			anchor := time.Duration(s.anchor.Load())
			end := anchor + time.Duration(s.endRel.Load())
			// Only the stream's own seconds: a stream that started 1 s ago
			// is judged on that second, a finished one on its last seconds.
			from, to := max(from, time.Duration(floorDiv(anchor, w))*w), min(to, time.Duration(floorDiv(end-1, w)+1)*w)
			if to <= from {
				l.Window = 0
				out = append(out, l)
				continue
			}
			l.Window = to - from
			intended := s.intendedIn(from, to, anchor, end)
			s.rec.window(from, to, func(b *measure.Bucket) {
				l.Requests = b.Requests
				l.Failures = b.Failures()
				l.ErrorRate = b.ErrorRate()
				l.P50, l.P99 = b.Quantile(50), b.Quantile(99)
				l.LagP99 = measure.Quantile(b.Lag, 99)
				l.Shed = b.ShedCount()
				if s.sched == nil {
					intended = b.Requests
				}
			})
			l.AchievedRate = float64(l.Requests) / l.Window.Seconds()
			l.IntendedRate = float64(intended) / l.Window.Seconds()
		}
		out = append(out, l)
	}
	return out
}

// Validity returns nil when every stream kept to its schedule by
// measure's lag rule ([measure.LagBudget]: late plus never-sent requests
// over those due, against the stream's budget), each over its whole span
// so far, or an error wrapping ErrBehindSchedule naming each stream that
// did not, with the second in which most requests were late. drill load
// maps it to exit 4.
func (e *Engine) Validity() error {
	var errs []error
	for _, s := range e.streams {
		st := s.state.Load()
		if st == statePending || st == stateSkipped || s.sched == nil {
			continue
		}
		total := int64(s.total())
		if st == stateRunning {
			anchor := time.Duration(s.anchor.Load())
			total = s.intendedIn(anchor, e.clock.Now(), anchor, anchor+time.Duration(s.endRel.Load()))
		}
		if total <= 0 {
			continue
		}
		sent := s.results.Load() + s.inflight.Load()
		if st == stateRunning {
			sent = max(sent, total) // hits due now may still be on their way to a worker
		}
		count := measure.LagCount{Intended: total, Sent: sent, Late: s.lateN.Load()}
		late, missed, frac := count.Late, count.Missed(), count.Fraction()
		if at := s.abortedAt.Load(); at != 0 {
			errs = append(errs, fmt.Errorf("%w: stream %q: stopped at t=%s when its dispatch lag reached %s (the generator was collapsing); %d of %d intended requests late or never sent",
				ErrBehindSchedule, s.name, time.Duration(at).Round(time.Millisecond), s.abortLag, late+missed, total))
			continue
		}
		if s.budget.Exceeded(count) {
			lagP99 := time.Duration(0)
			all := s.rec
			all.all(func(b *measure.Bucket) {
				lagP99 = measure.Quantile(b.Lag, 99)
			})
			detail := ""
			if at, n := all.worstLate(); n > 0 {
				detail = fmt.Sprintf("; most late requests were due in t=%s..%s (%d)", at, at+e.opts.BucketWidth, n)
			}
			if n := s.capped.Load(); n > 0 {
				detail += fmt.Sprintf("; for about %s all %d workers (maxWorkers) were waiting for responses, so the target's slowness and the worker cap held hits back, not the generator's speed: raise maxWorkers or lower the timeout",
					time.Duration(n)*100*time.Millisecond, s.maxWorkers)
			}
			errs = append(errs, fmt.Errorf("%w: stream %q: %d of %d intended requests went out more than %s late and %d never went out (%.2f%%, budget %.2f%%); dispatch lag p99 %s%s",
				ErrBehindSchedule, s.name, late, total, s.budget.LateAfter, missed, 100*frac, 100*s.budget.Fraction, lagP99.Round(time.Microsecond), detail))
		}
	}
	return errors.Join(errs...)
}

// streamLagBudget is st's lag budget (scenario key lagBudget) with
// measure's defaults for what it leaves unset. It fails when the fraction
// is outside 0..1.
func streamLagBudget(st scenario.Stream) (measure.LagBudget, error) {
	var b measure.LagBudget
	if lb := st.LagBudget; lb != nil {
		if lb.Fraction < 0 || lb.Fraction > 1 {
			return b, fmt.Errorf("lagBudget.fraction %v must be within 0..1", lb.Fraction)
		}
		b = measure.LagBudget{LateAfter: lb.Late.D(), Fraction: lb.Fraction}
	}
	return b.OrDefault(), nil
}
