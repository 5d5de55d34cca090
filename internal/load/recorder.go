package load

import (
	"sync"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// recorder keeps one stream's per-second buckets, keyed by the intended
// send time on the run's clock. Buckets that can still receive results are
// dense (measure.Bucket). Without a journal (the engine's Options.Seconds),
// older ones are packed (measure.Packed, a few KB each) and kept for the
// whole run. With one, closed seconds are taken out ([recorder.closeSeconds])
// and only the last [recentSeconds] of them stay, packed, for the live
// figures, plus one running aggregate of everything dropped: memory does
// not grow with run length. Safe for concurrent use.
type recorder struct {
	mu    sync.Mutex
	width time.Duration
	k0    int64 // bucket index of slots[0]
	slots []slot
	pool  []*measure.Bucket
	// scratch is reused by live().
	scratch *measure.Bucket

	// emitting is set by the first closeSeconds; next is the index of the
	// first second not yet taken out.
	emitting bool
	next     int64
	// dropped aggregates every second no longer held (nil: none), for the
	// whole-run lag figure; droppedWorstAt and droppedWorstLate keep the
	// dropped second with the most late requests.
	dropped          *measure.Bucket
	droppedWorstAt   time.Duration
	droppedWorstLate int64
}

type slot struct {
	dense  *measure.Bucket
	packed *measure.Packed
	// emitted: the second was taken out by closeSeconds; a dense bucket
	// beside it holds only results that arrived afterwards.
	emitted bool
}

// recentSeconds is how many taken-out seconds a journaling recorder keeps
// (packed) for the live figures ([Engine.Live] covers the last 5 s).
const recentSeconds = 10

const maxPool = 16

func newRecorder(width time.Duration, firstOffset time.Duration) *recorder {
	return &recorder{width: width, k0: floorDiv(firstOffset, width)}
}

func floorDiv(d, w time.Duration) int64 {
	k := int64(d / w)
	if d < 0 && d%w != 0 {
		k--
	}
	return k
}

// bucket returns the dense bucket holding clock offset off, creating or
// unpacking it. r.mu must be held.
func (r *recorder) bucket(off time.Duration) *measure.Bucket {
	k := floorDiv(off, r.width)
	if k < r.k0 {
		grow := make([]slot, r.k0-k, int(r.k0-k)+len(r.slots))
		r.slots = append(grow, r.slots...)
		r.k0 = k
	}
	i := int(k - r.k0)
	for len(r.slots) <= i {
		r.slots = append(r.slots, slot{})
	}
	s := &r.slots[i]
	if s.dense == nil {
		start := time.Duration(k) * r.width
		s.dense = r.newBucket(start)
		if r.emitting && k < r.next {
			// A straggler for a second already taken out: its dense bucket
			// holds the increment, taken out on the next close.
			s.emitted = true
		} else if s.packed != nil { // a straggler for a packed second: reopen it
			s.packed.MergeInto(s.dense)
			s.packed = nil
		}
	}
	return s.dense
}

// newBucket returns an empty bucket for [start, start+width), from the
// pool when it can. Every bucket of the recorder tells the local Service's
// own answers apart (ServiceAnswersCounted).
func (r *recorder) newBucket(start time.Duration) *measure.Bucket {
	var b *measure.Bucket
	if n := len(r.pool); n > 0 {
		b = r.pool[n-1]
		r.pool = r.pool[:n-1]
		b.Reset(start, r.width)
	} else {
		b = measure.NewBucket(start, r.width)
	}
	b.ServiceAnswersCounted = true
	return b
}

// outcome is one finished request, ready to record.
type outcome struct {
	intended   time.Duration // clock offset of the intended send time
	lag        time.Duration // actual send − intended
	latency    time.Duration // response (or error) time − intended
	code       int           // 0: no response
	errKind    string        // when code == 0
	retryAfter bool          // the response carried Retry-After
	late       bool          // lag beyond the stream's budget
	// byService: drill's local Service gave the response itself
	// (measure.ServiceAnswerHeader), not a replica.
	byService bool
	// checks are the verdicts of the stream's response checks that
	// applied to the response; nil for a stream without checks. Lent for
	// the record call only.
	checks []checkVerdict
}

func (r *recorder) record(o outcome) {
	r.mu.Lock()
	b := r.bucket(o.intended)
	b.Requests++
	measure.Record(b.Latency, o.latency)
	measure.Record(b.Lag, o.lag)
	if o.late {
		b.Late++
	}
	if o.code == 0 {
		b.Errors[o.errKind]++
	} else {
		b.Codes[o.code]++
		if o.code >= 200 && o.code < 400 {
			b.OK++
			measure.Record(b.Success, o.latency)
		}
		if o.byService {
			if b.ServiceAnswers == nil {
				b.ServiceAnswers = map[int]int64{}
			}
			b.ServiceAnswers[o.code]++
		} else if o.code == 503 || o.code == 429 {
			measure.Record(b.Shed, o.latency)
			if o.retryAfter {
				b.ShedRetryAfter++
			}
		}
		if len(o.checks) > 0 {
			recordChecks(b, o.checks, o.intended, o.code)
		}
	}
	r.mu.Unlock()
}

// addTransfer adds bytes and retries of one request to the bucket of its
// intended time (clock offset).
func (r *recorder) addTransfer(intended time.Duration, in, out, retries int64) {
	if in == 0 && out == 0 && retries == 0 {
		return
	}
	r.mu.Lock()
	b := r.bucket(intended)
	b.BytesIn += in
	b.BytesOut += out
	b.Retries += retries
	r.mu.Unlock()
}

// pack compacts every dense bucket that ended before the clock offset
// before. It returns how many it packed.
func (r *recorder) pack(before time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range r.slots {
		s := &r.slots[i]
		if s.dense == nil || s.dense.Start+s.dense.Width > before {
			continue
		}
		s.packed = measure.Pack(s.dense)
		if len(r.pool) < maxPool {
			r.pool = append(r.pool, s.dense)
		}
		s.dense = nil
		n++
	}
	return n
}

// snapshot returns copies of the buckets with index in [from, to) (bucket
// indices), contiguous; seconds without any result get empty buckets.
func (r *recorder) snapshot(from, to int64) []*measure.Bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.k0 + int64(len(r.slots)); n > to {
		to = n
	}
	if len(r.slots) > 0 && r.k0 < from {
		from = r.k0
	}
	out := make([]*measure.Bucket, 0, max(to-from, 0))
	for k := from; k < to; k++ {
		start := time.Duration(k) * r.width
		i := k - r.k0
		var b *measure.Bucket
		if i >= 0 && i < int64(len(r.slots)) {
			s := r.slots[i]
			switch {
			case s.packed != nil:
				b = s.packed.Bucket() // stays packed: a run's seconds fit in memory
				b.Merge(s.dense)
			case s.dense != nil:
				b = s.dense.Clone()
			}
		}
		if b == nil {
			b = measure.NewBucket(start, r.width)
			b.ServiceAnswersCounted = true
		}
		out = append(out, b)
	}
	return out
}

// window merges the buckets starting in [from, to) (clock offsets) into a
// scratch bucket and calls fn with it while holding the lock.
func (r *recorder) window(from, to time.Duration, fn func(*measure.Bucket)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.scratch == nil {
		r.scratch = measure.NewBucket(from, to-from)
	} else {
		r.scratch.Reset(from, to-from)
	}
	for i := range r.slots {
		s := &r.slots[i]
		start := time.Duration(r.k0+int64(i)) * r.width
		if start < from || start >= to {
			continue
		}
		if s.dense != nil {
			r.scratch.Merge(s.dense)
		}
		if s.packed != nil {
			s.packed.MergeInto(r.scratch)
		}
	}
	fn(r.scratch)
}

// all merges every second the recorder saw, held or dropped, into a
// scratch bucket and calls fn with it while holding the lock.
func (r *recorder) all(fn func(*measure.Bucket)) {
	lo, hi := time.Duration(r.k0)*r.width, time.Duration(r.k0+int64(len(r.slots)))*r.width
	r.window(lo, hi, func(b *measure.Bucket) {
		b.Merge(r.dropped)
		fn(b)
	})
}

// closed is a second taken out by closeSeconds; increment is true for
// results that arrived after their second had been taken out.
type closed struct {
	b         *measure.Bucket
	increment bool
}

// closeSeconds takes out the seconds with index in [max(first, next),
// upto), contiguous (an empty bucket for a second without results), then
// the increments of earlier seconds that got late results, and drops held
// seconds older than recentSeconds before upto. The buckets are the
// caller's until it hands them back with recycle.
func (r *recorder) closeSeconds(first, upto int64) []closed {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.emitting {
		r.emitting, r.next = true, first
	}
	r.next = max(r.next, first)
	var out []closed
	for i := range r.slots {
		k := r.k0 + int64(i)
		if s := &r.slots[i]; k < r.next && s.emitted && s.dense != nil {
			out = append(out, closed{b: s.dense, increment: true})
			if s.packed == nil {
				s.packed = measure.Pack(s.dense)
			} else {
				b := s.packed.Unpack()
				b.Merge(s.dense)
				s.packed = measure.Pack(b)
			}
			s.dense = nil
		}
	}
	for k := r.next; k < upto; k++ {
		var b *measure.Bucket
		if i := k - r.k0; i >= 0 && i < int64(len(r.slots)) {
			s := &r.slots[i]
			if s.packed != nil && s.dense == nil { // packed before journaling began
				s.dense = s.packed.Unpack()
				s.packed = nil
			}
			if s.dense != nil {
				b = s.dense
				s.packed, s.dense = measure.Pack(b), nil
			}
			s.emitted = true
		}
		if b == nil {
			b = r.newBucket(time.Duration(k) * r.width)
		}
		out = append(out, closed{b: b})
	}
	r.next = max(r.next, upto)
	// Drop what the live figures no longer need.
	keepFrom := r.next - recentSeconds
	n := 0
	for n < len(r.slots) && r.k0+int64(n) < keepFrom {
		s := &r.slots[n]
		if s.dense != nil { // still open: keep it and everything after
			break
		}
		if s.packed != nil {
			if r.dropped == nil {
				r.dropped = measure.NewBucket(0, 0)
			}
			s.packed.MergeInto(r.dropped)
			if l := s.packed.Late(); l > r.droppedWorstLate {
				r.droppedWorstAt, r.droppedWorstLate = time.Duration(r.k0+int64(n))*r.width, l
			}
		}
		n++
	}
	if n > 0 {
		r.slots = append(r.slots[:0:0], r.slots[n:]...)
		r.k0 += int64(n)
	}
	return out
}

// recycle hands buckets returned by closeSeconds back for reuse.
func (r *recorder) recycle(cs []closed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		if len(r.pool) >= maxPool {
			return
		}
		r.pool = append(r.pool, c.b)
	}
}

// held counts the seconds the recorder holds in memory, dense or packed.
func (r *recorder) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.slots {
		if s.dense != nil || s.packed != nil {
			n++
		}
	}
	return n
}

// worstLate returns the start (clock offset) of the bucket with the most
// late requests and that count; late is 0 when none was late.
func (r *recorder) worstLate() (start time.Duration, late int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start, late = r.droppedWorstAt, r.droppedWorstLate
	for i := range r.slots {
		s := &r.slots[i]
		n := int64(0)
		if s.dense != nil {
			n += s.dense.Late
		}
		if s.packed != nil {
			n += s.packed.Late()
		}
		if n > late {
			start, late = time.Duration(r.k0+int64(i))*r.width, n
		}
	}
	return start, late
}

// span returns the bucket indices [first, end) holding results.
func (r *recorder) span() (int64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.k0, r.k0 + int64(len(r.slots))
}
