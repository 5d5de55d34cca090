package load

import (
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// TestRecorderSuccessLatency: only responses with status 200-399 go into a
// second's success histogram, so its count is the second's OK count and
// its percentiles are those of the successful requests alone: fast 503s
// and slow timeouts beside them change neither.
func TestRecorderSuccessLatency(t *testing.T) {
	r := newRecorder(time.Second, 0)
	ms := time.Millisecond
	for _, o := range []outcome{
		{intended: 100 * ms, latency: 20 * ms, code: 200},
		{intended: 200 * ms, latency: 40 * ms, code: 302},
		{intended: 300 * ms, latency: 1 * ms, code: 503},
		{intended: 400 * ms, latency: 2 * ms, code: 429},
		{intended: 500 * ms, latency: 900 * ms, code: 500},
		{intended: 600 * ms, latency: 2 * time.Second, errKind: measure.ErrTimeout},
	} {
		r.record(o)
	}
	b := r.snapshot(0, 1)[0]
	if b.OK != 2 || b.Success.TotalCount() != 2 || !b.SuccessRecorded() {
		t.Fatalf("OK %d, success histogram %d, recorded %v; want 2, 2, true", b.OK, b.Success.TotalCount(), b.SuccessRecorded())
	}
	lo, hi := measure.Quantile(b.Success, 0), measure.Quantile(b.Success, 100)
	if lo < 19*ms || lo > 21*ms || hi < 39*ms || hi > 41*ms {
		t.Errorf("success latency from %s to %s, want 20ms to 40ms", lo, hi)
	}
	if all := measure.Quantile(b.Latency, 100); all < 1900*ms {
		t.Errorf("latency of every request reaches %s, want the 2 s timeout in it", all)
	}
}
