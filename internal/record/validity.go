package record

import (
	"fmt"
	"sort"
	"time"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// DefaultMaxConnectionErrors is a stream's default maxConnectionErrors:
// more than half of its requests failing at connection level makes the run
// invalid.
const DefaultMaxConnectionErrors = 0.5

// CheckConnectionErrors returns the streams of series whose share of
// connection-level errors (measure.ConnectionLevel) over [from, to) (clock
// offsets, usually the run window) is above the stream's
// maxConnectionErrors (default DefaultMaxConnectionErrors), sorted by
// name. sc may be nil (defaults for every stream).
func CheckConnectionErrors(sc *scenario.Scenario, series map[string]*measure.Series, from, to time.Duration) []StreamConnErrors {
	bounds := map[string]float64{}
	if sc != nil {
		for _, st := range sc.Streams {
			if st.MaxConnectionErrors != nil {
				bounds[st.Name] = *st.MaxConnectionErrors
			}
		}
	}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []StreamConnErrors
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		b := s.Window(from, to)
		if b.Requests == 0 {
			continue
		}
		bound, ok := bounds[n]
		if !ok {
			bound = DefaultMaxConnectionErrors
		}
		errs := b.ConnectionErrors()
		frac := float64(errs) / float64(b.Requests)
		if frac <= bound {
			continue
		}
		by := map[string]int64{}
		for k, c := range b.Errors {
			if measure.ConnectionLevel(k) && c > 0 {
				by[k] = c
			}
		}
		out = append(out, StreamConnErrors{Stream: n, Errors: errs, Requests: b.Requests, ByKind: by, Fraction: frac, Bound: bound})
	}
	return out
}

// CheckLag judges each stream's recorded seconds over [from, to) by
// measure's lag rule ([measure.LagBudget]: requests sent later than the
// stream's lagBudget.late, plus those intended and never sent, over those
// due, against lagBudget.fraction; the defaults are measure's) and returns
// the streams beyond budget, sorted by name. The load engine counted a
// request late (Bucket.Late) by the stream's own budget.
func CheckLag(sc *scenario.Scenario, series map[string]*measure.Series, from, to time.Duration) []StreamLag {
	var out []StreamLag
	budgets := map[string]measure.LagBudget{}
	if sc != nil {
		for _, st := range sc.Streams {
			if lb := st.LagBudget; lb != nil {
				budgets[st.Name] = measure.LagBudget{LateAfter: lb.Late.D(), Fraction: lb.Fraction}
			}
		}
	}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		b := s.Window(from, to)
		c := b.LagCount()
		if c.Due() == 0 {
			continue
		}
		lb := budgets[n].OrDefault()
		if !lb.Exceeded(c) {
			continue
		}
		l := StreamLag{Stream: n, Late: b.Late, Requests: b.Requests, Missed: c.Missed(),
			Fraction: c.Fraction(), Budget: lb.Fraction, LateAfter: lb.LateAfter,
			LagP99: measure.Quantile(b.Lag, 99)}
		if l.Missed > 0 {
			l.Intended = c.Intended
		}
		for _, bk := range s.Buckets {
			if bk.Within(from, to) && bk.Late > l.WorstLate {
				l.WorstAt, l.WorstLate = bk.Start, bk.Late
			}
		}
		out = append(out, l)
	}
	return out
}

// CheckGenerator returns a problem (for Validity.Problems) per stream
// whose generator could not send some of its requests over [from, to)
// because drill ran out of file descriptors (measure.ErrGeneratorFiles),
// sorted by stream; limit is the process's open-file limit (0: unknown).
// Those requests never reached the target, so no verdict on the target
// can rest on them.
func CheckGenerator(series map[string]*measure.Series, from, to time.Duration, limit uint64) []string {
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	lim := ""
	if limit > 0 {
		lim = fmt.Sprintf(" (open-file limit %d)", limit)
	}
	var out []string
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		var failed int64
		var first *measure.Bucket
		for _, b := range s.Buckets {
			if !b.Within(from, to) || b.GeneratorFailures() == 0 {
				continue
			}
			failed += b.GeneratorFailures()
			if first == nil {
				first = b
			}
		}
		if failed > 0 {
			out = append(out, fmt.Sprintf("stream %q: drill ran out of file descriptors%s and could not send %d requests, the first due in t=%s..%s: they never reached the target; raise the limit (ulimit -n 65536) or lower the stream's maxWorkers or timeout (each request in flight holds a connection)",
				n, lim, failed, first.Start, first.Start+first.Width))
		}
	}
	return out
}
