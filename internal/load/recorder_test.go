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
