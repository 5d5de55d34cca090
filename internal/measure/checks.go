package measure

import (
	"sort"
	"time"
)

// MaxCheckExamples is how many failures of each response check a bucket
// keeps as evidence ([CheckCount.Examples]): the earliest by intended send
// time. A merged window keeps the earliest MaxCheckExamples of its
// seconds', so a stream's evidence stays this small however long it runs.
const MaxCheckExamples = 5

// CheckCount is one response check's tally in a bucket (a stream's
// streams[].checks entry, by name): the responses it applied to (their
// status among the check's), how many of those failed it, and the first
// failures as evidence.
type CheckCount struct {
	// Applied counts the responses the check applied to.
	Applied int64 `json:"applied"`
	// Failed counts the applied responses that failed the check; at most
	// Applied.
	Failed int64 `json:"failed,omitempty"`
	// Examples are the earliest failures (by intended send time), at most
	// [MaxCheckExamples].
	Examples []CheckFailure `json:"examples,omitempty"`
}

// CheckFailure is one response that failed a check, kept as evidence.
type CheckFailure struct {
	// At is the request's intended send time (offset on the run's clock,
	// ns in JSON).
	At time.Duration `json:"at"`
	// Status is the response's HTTP status code.
	Status int `json:"status"`
	// Reason says why it failed, e.g. `Retry-After "7" != "5"` or
	// "no field fallback.tax_cents".
	Reason string `json:"reason"`
}

// WantsExample reports whether c keeps a failure at intended time at as
// an example: while it holds fewer than [MaxCheckExamples], or when at is
// earlier than its latest one. The recorder asks before it formats a
// reason, so failures beyond the examples cost nothing but a count.
func (c *CheckCount) WantsExample(at time.Duration) bool {
	return len(c.Examples) < MaxCheckExamples || at < c.Examples[len(c.Examples)-1].At
}

// AddExample keeps f among c's examples when it is one of the earliest
// [MaxCheckExamples] (see [CheckCount.WantsExample]). It does not count
// f: the caller adds to Failed.
func (c *CheckCount) AddExample(f CheckFailure) {
	if !c.WantsExample(f.At) {
		return
	}
	i := sort.Search(len(c.Examples), func(i int) bool { return c.Examples[i].At > f.At })
	c.Examples = append(c.Examples, CheckFailure{})
	copy(c.Examples[i+1:], c.Examples[i:])
	c.Examples[i] = f
	if len(c.Examples) > MaxCheckExamples {
		c.Examples = c.Examples[:MaxCheckExamples]
	}
}

// mergeChecks adds o's check tallies into b's, allocating b's map when
// it is nil and o has some.
func (b *Bucket) mergeChecks(o *Bucket) {
	if len(o.Checks) == 0 {
		return
	}
	if b.Checks == nil {
		b.Checks = make(map[string]CheckCount, len(o.Checks))
	}
	for name, oc := range o.Checks {
		c := b.Checks[name]
		c.Applied += oc.Applied
		c.Failed += oc.Failed
		if len(c.Examples) > 0 {
			// Own the slice before adding: a shallow copy of a bucket may
			// share it.
			c.Examples = append([]CheckFailure(nil), c.Examples...)
		}
		for _, f := range oc.Examples {
			c.AddExample(f)
		}
		b.Checks[name] = c
	}
}

// cloneChecks is a deep copy of m (nil stays nil).
func cloneChecks(m map[string]CheckCount) map[string]CheckCount {
	if m == nil {
		return nil
	}
	out := make(map[string]CheckCount, len(m))
	for name, c := range m {
		c.Examples = append([]CheckFailure(nil), c.Examples...)
		out[name] = c
	}
	return out
}
