package load

import (
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// TestRecorderPacksAndReopens: closed seconds are packed; a straggler for
// a packed second reopens it; snapshots see everything, contiguous.
func TestRecorderPacksAndReopens(t *testing.T) {
	r := newRecorder(time.Second, 0)
	for sec := 0; sec < 5; sec++ {
		for i := 0; i < 100; i++ {
			at := time.Duration(sec)*time.Second + time.Duration(i)*10*time.Millisecond
			r.record(outcome{intended: at, latency: time.Duration(sec+1) * time.Millisecond, lag: 50 * time.Microsecond, code: 200})
		}
	}
	r.addTransfer(1500*time.Millisecond, 10, 20, 1)
	if n := r.pack(3 * time.Second); n != 3 {
		t.Fatalf("packed %d buckets, want 3", n)
	}
	if len(r.pool) == 0 {
		t.Fatal("packed buckets were not pooled")
	}
	// A straggler for second 1 (packed) and a result after a gap (second 7).
	r.record(outcome{intended: 1200 * time.Millisecond, latency: 3 * time.Second, code: 0, errKind: measure.ErrTimeout, late: true})
	r.record(outcome{intended: 7 * time.Second, latency: time.Millisecond, code: 503, retryAfter: true})
	bs := r.snapshot(0, 8)
	if len(bs) != 8 {
		t.Fatalf("%d buckets, want 8", len(bs))
	}
	for i, b := range bs {
		if b.Start != time.Duration(i)*time.Second {
			t.Fatalf("bucket %d starts at %s", i, b.Start)
		}
	}
	b1 := bs[1]
	if b1.Requests != 101 || b1.Errors[measure.ErrTimeout] != 1 || b1.Late != 1 || b1.BytesIn != 10 || b1.BytesOut != 20 || b1.Retries != 1 {
		t.Fatalf("bucket 1: %+v", b1)
	}
	if got := b1.Quantile(100); got < 2900*time.Millisecond {
		t.Fatalf("bucket 1 max %s: straggler lost", got)
	}
	if bs[5].Requests != 0 || bs[6].Requests != 0 || bs[7].ShedRetryAfter != 1 || bs[7].Shed.TotalCount() != 1 {
		t.Fatalf("gap/shed buckets wrong: %v %v %v", bs[5], bs[6], bs[7])
	}
	var got int64
	r.window(0, 5*time.Second, func(b *measure.Bucket) { got = b.Requests })
	if got != 501 {
		t.Fatalf("window over packed and dense buckets has %d requests, want 501", got)
	}
}

// TestRecorderJournalHoldsBoundedSeconds: a journaling recorder fed an
// hour of one result per 10 ms, closing seconds as a run would each
// second (timeout 1 s + 2 s behind), never holds more than the open
// seconds plus recentSeconds, whatever the length; every second comes out
// once, contiguous, with its counts; a straggler for a second already out
// comes out as an increment; the whole-run lag and worst late second
// survive the dropping.
func TestRecorderJournalHoldsBoundedSeconds(t *testing.T) {
	const seconds = 3600
	r := newRecorder(time.Second, 0)
	var out []closed
	next := int64(0)
	maxHeld := 0
	for sec := 0; sec < seconds; sec++ {
		for i := 0; i < 100; i++ {
			at := time.Duration(sec)*time.Second + time.Duration(i)*10*time.Millisecond
			r.record(outcome{intended: at, latency: time.Millisecond, lag: 50 * time.Microsecond, code: 200, late: sec == 1234 && i < 7})
		}
		// The clock is at sec+1: seconds ending before now-3s are closed.
		cs := r.closeSeconds(0, int64(sec+1-3))
		for _, c := range cs {
			if c.increment {
				t.Fatalf("second %d: unexpected increment", sec)
			}
			if got := int64(c.b.Start / time.Second); got != next {
				t.Fatalf("second %d came out after %d", got, next-1)
			}
			if c.b.Requests != 100 || c.b.OK != 100 || c.b.Latency.TotalCount() != 100 {
				t.Fatalf("second %s: %v", c.b.Start, c.b)
			}
			next++
		}
		out = append(out, cs...)
		r.recycle(cs)
		maxHeld = max(maxHeld, r.held())
	}
	if want := 3 + recentSeconds + 1; maxHeld > want {
		t.Fatalf("recorder held up to %d seconds over an hour, want at most %d", maxHeld, want)
	}
	// A straggler for a second long out, then the final close.
	r.record(outcome{intended: 100*time.Second + time.Millisecond, latency: 2 * time.Second, code: 0, errKind: measure.ErrTimeout})
	cs := r.closeSeconds(0, seconds)
	var inc *measure.Bucket
	for _, c := range cs {
		if c.increment {
			inc = c.b
		}
	}
	if inc == nil || inc.Start != 100*time.Second || inc.Requests != 1 || inc.Errors[measure.ErrTimeout] != 1 {
		t.Fatalf("straggler increment: %v", inc)
	}
	if n := len(out) + len(cs) - 1; n != seconds {
		t.Fatalf("%d seconds came out, want %d", n, seconds)
	}
	if at, late := r.worstLate(); at != 1234*time.Second || late != 7 {
		t.Fatalf("worst late second %s (%d), want 1234s (7)", at, late)
	}
	var lagN int64
	r.all(func(b *measure.Bucket) { lagN = b.Lag.TotalCount() })
	if want := int64(seconds*100 + 1); lagN != want {
		t.Fatalf("whole-run lag histogram has %d values, want %d", lagN, want)
	}
}
