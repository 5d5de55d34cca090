package report

import (
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// TestRateLines404: the throughput plot gets a "not found (404)" line
// only when the stream got 404s, at their rate per second, so a gateway's
// no-route phases stand out from timeouts and other failures.
func TestRateLines404(t *testing.T) {
	bucket := func(at time.Duration, codes map[int]int64) *measure.Bucket {
		var n int64
		for _, c := range codes {
			n += c
		}
		return &measure.Bucket{Start: at, Width: time.Second, Intended: n, Requests: n, Codes: codes, Errors: map[string]int64{}}
	}
	names := func(ls []line) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.name)
		}
		return out
	}
	ok := &measure.Series{Stream: "orders", Buckets: []*measure.Bucket{
		bucket(0, map[int]int64{201: 100}), bucket(time.Second, map[int]int64{201: 90, 503: 10})}}
	if got := names(rateLines(ok)); len(got) != 4 {
		t.Errorf("lines without 404s = %q, want intended, completed, failed, shed only", got)
	}
	routed := &measure.Series{Stream: "orders", Buckets: []*measure.Bucket{
		bucket(0, map[int]int64{201: 100}), bucket(time.Second, map[int]int64{201: 20, 404: 380}), bucket(2*time.Second, map[int]int64{201: 100})}}
	ls := rateLines(routed)
	last := ls[len(ls)-1]
	if last.name != "not found (404)" {
		t.Fatalf("lines with 404s = %q, want a last line not found (404)", names(ls))
	}
	want := []float64{0, 380, 0}
	for i, p := range last.xys {
		if p.Y != want[i] {
			t.Errorf("404s per second at %.1fs = %g, want %g", p.X, p.Y, want[i])
		}
	}
}
