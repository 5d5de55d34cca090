package workers

import (
	"bytes"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// TestChecksSurviveWorkerLines: two workers' seconds with response-check
// tallies, written as worker lines and read back as the coordinator reads
// them, merge into the sum of both, with the earliest failures of both
// as examples.
func TestChecksSurviveWorkerLines(t *testing.T) {
	var out [2]bytes.Buffer
	for w := range out {
		lw := &lineWriter{w: &out[w]}
		b := measure.NewBucket(3*time.Second, time.Second)
		b.Requests = 10
		c := measure.CheckCount{Applied: 10, Failed: 3}
		for i := range 3 {
			// Worker 0 sends the even hits, worker 1 the odd ones.
			c.AddExample(measure.CheckFailure{At: 3*time.Second + time.Duration(2*i+w)*time.Millisecond, Status: 503, Reason: `Retry-After "7" != "5"`})
		}
		b.Checks = map[string]measure.CheckCount{"retry-after-5": c}
		if err := lw.WriteSecond("tax", b); err != nil {
			t.Fatal(err)
		}
	}
	var merged *measure.Bucket
	m := newMerger(2, sinkFunc(func(_ string, b *measure.Bucket) error {
		merged = b
		return nil
	}))
	for w := range out {
		err := measure.ReadJournal(&out[w], measure.JournalReader{Second: func(stream string, b *measure.Bucket) error {
			return m.add(w, stream, b)
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if merged == nil {
		t.Fatal("the merger handed on no second")
	}
	got := merged.Checks["retry-after-5"]
	if got.Applied != 20 || got.Failed != 6 || len(got.Examples) != measure.MaxCheckExamples {
		t.Fatalf("merged check = applied %d, failed %d, %d examples; want 20, 6, %d", got.Applied, got.Failed, len(got.Examples), measure.MaxCheckExamples)
	}
	for i, f := range got.Examples {
		if want := 3*time.Second + time.Duration(i)*time.Millisecond; f.At != want || f.Reason != `Retry-After "7" != "5"` {
			t.Errorf("example %d = %+v, want at %s", i, f, want)
		}
	}
}
