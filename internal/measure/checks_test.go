package measure

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkBucket is a bucket at start with one check tally.
func checkBucket(start time.Duration, name string, applied, failed int64, at ...time.Duration) *Bucket {
	b := NewBucket(start, time.Second)
	c := CheckCount{Applied: applied, Failed: failed}
	for _, a := range at {
		c.AddExample(CheckFailure{At: a, Status: 503, Reason: "Retry-After \"7\" != \"5\""})
	}
	b.Checks = map[string]CheckCount{name: c}
	return b
}

func TestCheckExamplesKeepTheEarliest(t *testing.T) {
	var c CheckCount
	for _, at := range []time.Duration{9, 3, 7, 1, 8, 5, 2, 6} {
		c.AddExample(CheckFailure{At: at})
	}
	var got []time.Duration
	for _, f := range c.Examples {
		got = append(got, f.At)
	}
	if want := []time.Duration{1, 2, 3, 5, 6}; !reflect.DeepEqual(got, want) {
		t.Fatalf("examples at %v, want %v", got, want)
	}
	if c.WantsExample(7) || !c.WantsExample(4) {
		t.Fatalf("WantsExample: full at %v, should want only earlier times", got)
	}
}

func TestMergeAddsChecks(t *testing.T) {
	a := checkBucket(0, "retry-after-5", 10, 2, 100, 200)
	b := checkBucket(time.Second, "retry-after-5", 5, 5, 1100, 1200, 1300, 1400)
	b.Checks["problem-code"] = CheckCount{Applied: 3}
	w := NewBucket(0, 2*time.Second)
	w.Merge(a)
	w.Merge(b)
	got := w.Checks["retry-after-5"]
	if got.Applied != 15 || got.Failed != 7 || len(got.Examples) != MaxCheckExamples {
		t.Fatalf("merged = applied %d failed %d examples %d, want 15, 7, %d", got.Applied, got.Failed, len(got.Examples), MaxCheckExamples)
	}
	if got.Examples[0].At != 100 || got.Examples[4].At != 1300 {
		t.Fatalf("merged examples %+v, want the earliest five", got.Examples)
	}
	if pc := w.Checks["problem-code"]; pc.Applied != 3 || pc.Failed != 0 {
		t.Fatalf("problem-code = %+v, want applied 3", pc)
	}
	// The sources are untouched.
	if len(a.Checks["retry-after-5"].Examples) != 2 || len(b.Checks["retry-after-5"].Examples) != 4 {
		t.Fatalf("merge changed its sources: %+v, %+v", a.Checks, b.Checks)
	}
}

func TestChecksSurvivePackCloneAndReset(t *testing.T) {
	a := checkBucket(0, "c", 4, 1, 100)
	p := Pack(a)
	if got := p.Unpack().Checks["c"]; got.Applied != 4 || got.Failed != 1 || len(got.Examples) != 1 {
		t.Fatalf("unpacked = %+v", got)
	}
	c := a.Clone()
	c.Checks["c"] = CheckCount{}
	if a.Checks["c"].Applied != 4 {
		t.Fatal("Clone shares the Checks map")
	}
	a.Reset(time.Second, time.Second)
	if len(a.Checks) != 0 {
		t.Fatalf("Reset kept %v", a.Checks)
	}
}

func TestChecksJSON(t *testing.T) {
	a := checkBucket(0, "retry-after-5", 10, 1, 100)
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Bucket
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Checks, a.Checks) {
		t.Fatalf("round trip: %+v, want %+v", back.Checks, a.Checks)
	}
	// A bucket without checks (nil, or emptied by Reset) writes no key,
	// so records without checks are what they were before.
	for _, b := range []*Bucket{NewBucket(0, time.Second), func() *Bucket { a.Reset(0, time.Second); return a }()} {
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "checks") {
			t.Fatalf("bucket without checks encodes them: %s", data)
		}
		var back Bucket
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if back.Checks != nil {
			t.Fatalf("decoded Checks = %v, want nil", back.Checks)
		}
	}
}
