package workers

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// sinkFunc adapts a function to load.SecondSink.
type sinkFunc func(stream string, b *measure.Bucket) error

func (f sinkFunc) WriteSecond(stream string, b *measure.Bucket) error { return f(stream, b) }

// TestMergeEqualsOneHistogram: the seconds of 3 workers, each holding the
// latencies of the hits i mod 3, merge into exactly the histogram one
// process would have recorded from all the hits: same counts, same
// quantiles to the microsecond (the HDR precision is the same on both
// sides, and merging HDR histograms of one precision loses nothing).
func TestMergeEqualsOneHistogram(t *testing.T) {
	const workers, seconds, perSecond = 3, 5, 1000
	rng := rand.New(rand.NewPCG(1, 2))
	one := measure.NewBucket(0, 0)
	merged := measure.NewBucket(0, 0)
	m := newMerger(workers, sinkFunc(func(_ string, b *measure.Bucket) error {
		merged.Merge(b)
		return nil
	}))
	for s := range seconds {
		start := time.Duration(s) * time.Second
		parts := make([]*measure.Bucket, workers)
		for i := range parts {
			parts[i] = measure.NewBucket(start, time.Second)
		}
		for seq := range perSecond {
			// A long-tailed latency: mostly 20-25 ms, one in fifty 100-900 ms.
			v := 20_000 + rng.Int64N(5_000)
			if rng.IntN(50) == 0 {
				v = 100_000 + rng.Int64N(800_000)
			}
			measure.Record(one.Latency, time.Duration(v)*time.Microsecond)
			measure.Record(parts[seq%workers].Latency, time.Duration(v)*time.Microsecond)
			one.Intended++
			parts[seq%workers].Intended++
		}
		for i, p := range parts {
			if err := m.add(i, "orders", p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if inc, err := m.flush(); err != nil || len(inc) > 0 {
		t.Fatalf("flush: %v, incomplete %v", err, inc)
	}
	if merged.Intended != one.Intended || merged.Latency.TotalCount() != one.Latency.TotalCount() {
		t.Fatalf("merged %d intended, %d latencies; one process %d, %d", merged.Intended, merged.Latency.TotalCount(), one.Intended, one.Latency.TotalCount())
	}
	for _, q := range []float64{50, 90, 99, 99.9, 100} {
		if got, want := merged.Quantile(q), one.Quantile(q); got != want {
			t.Errorf("p%g: merged %s, one process %s", q, got, want)
		}
	}
}
