package load

import (
	"sync"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// recorder keeps one stream's per-second buckets, keyed by the intended
// send time on the run's clock. Buckets that can still receive results are
// dense (measure.Bucket); older ones are packed (measure.Packed, a few KB
// each), so memory stays nearly flat over a long run. Safe for concurrent
// use.
type recorder struct {
	mu    sync.Mutex
	width time.Duration
	k0    int64 // bucket index of slots[0]
	slots []slot
	pool  []*measure.Bucket
	// scratch is reused by live().
	scratch *measure.Bucket
}

type slot struct {
	dense  *measure.Bucket
	packed *measure.Packed
}

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
		if s.packed != nil { // a straggler for a packed second: reopen it
			s.packed.MergeInto(s.dense)
			s.packed = nil
		}
	}
	return s.dense
}

func (r *recorder) newBucket(start time.Duration) *measure.Bucket {
	if n := len(r.pool); n > 0 {
		b := r.pool[n-1]
		r.pool = r.pool[:n-1]
		b.Reset(start, r.width)
		return b
	}
	return measure.NewBucket(start, r.width)
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
		}
		if o.code == 503 || o.code == 429 {
			measure.Record(b.Shed, o.latency)
			if o.retryAfter {
				b.ShedRetryAfter++
			}
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
			case s.dense != nil:
				b = s.dense.Clone()
			case s.packed != nil:
				b = s.packed.Unpack()
			}
		}
		if b == nil {
			b = measure.NewBucket(start, r.width)
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
		switch {
		case s.dense != nil:
			r.scratch.Merge(s.dense)
		case s.packed != nil:
			s.packed.MergeInto(r.scratch)
		}
	}
	fn(r.scratch)
}

// worstLate returns the start (clock offset) of the bucket with the most
// late requests and that count; late is 0 when none was late.
func (r *recorder) worstLate() (start time.Duration, late int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.slots {
		s := &r.slots[i]
		n := int64(0)
		switch {
		case s.dense != nil:
			n = s.dense.Late
		case s.packed != nil:
			n = s.packed.Late()
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
