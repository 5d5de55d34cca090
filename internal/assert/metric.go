package assert

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// compare applies op ("<", "<=", ">", ">=", "==", "!=") to v and bound.
func compare(op string, v, bound float64) (bool, error) {
	switch op {
	case "<":
		return v < bound, nil
	case "<=":
		return v <= bound, nil
	case ">":
		return v > bound, nil
	case ">=":
		return v >= bound, nil
	case "==":
		return v == bound, nil
	case "!=":
		return v != bound, nil
	}
	return false, fmt.Errorf("unknown op %q; available: <, <=, ==, !=, >, >=", op)
}

// labelsMatch reports whether every label of want is in have with the same
// value.
func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// metricSamples returns the Metric events of name whose labels include
// want, in time order.
func metricSamples(in *input, name string, want map[string]string) []event.Event {
	var out []event.Event
	for _, e := range in.events {
		if e.Kind == event.Metric && e.Metric == name && labelsMatch(want, e.Labels) {
			out = append(out, e)
		}
	}
	return out
}

// metricBound checks a metric condition's fields and returns the bound text.
func metricBound(a scenario.Assertion) (string, error) {
	if a.Metric == "" || a.Op == "" || a.Value == nil {
		return "", fmt.Errorf("%s assertion on a metric needs metric, op and value", a.Type)
	}
	if _, err := compare(a.Op, 0, 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%s %s %s", a.Metric, labelString(a.Labels), a.Op, FormatValue(*a.Value)), nil
}

// windowSamples returns the samples of a.Metric (series selected by
// a.Labels) inside the window; with none it sets r's error ("no samples of
// m{l} in window") and returns nil.
func windowSamples(in *input, a scenario.Assertion, r *Result) []event.Event {
	var samples []event.Event
	for _, e := range metricSamples(in, a.Metric, a.Labels) {
		if inWindow(in.win, e.At) {
			samples = append(samples, e)
		}
	}
	if len(samples) == 0 {
		setError(r, "no samples of %s%s in %s", a.Metric, labelString(a.Labels), r.Window)
		return nil
	}
	return samples
}

// judgeMetric requires every sample of Metric (series selected by Labels)
// in the window to satisfy Op Value. The figure is the worst sample: the
// largest for < and <=, the smallest for > and >=, the first violating one
// for == and !=. No sample in the window is an error.
func judgeMetric(in *input, a scenario.Assertion, r *Result) {
	bound, err := metricBound(a)
	if err != nil {
		setError(r, "%v", err)
		return
	}
	r.Bound = "every sample " + bound
	samples := windowSamples(in, a, r)
	if samples == nil {
		return
	}
	worst := samples[0]
	var bad []event.Event
	for _, e := range samples {
		ok, _ := compare(a.Op, e.Value, *a.Value)
		if !ok {
			bad = append(bad, e)
		}
		switch a.Op {
		case "<", "<=":
			if e.Value > worst.Value {
				worst = e
			}
		case ">", ">=":
			if e.Value < worst.Value {
				worst = e
			}
		}
	}
	if (a.Op == "==" || a.Op == "!=") && len(bad) > 0 {
		// For == the worst sample is the one farthest from the value (the
		// first of them); for != every bad sample equals it (the first).
		worst = bad[0]
		if a.Op == "==" {
			for _, e := range bad[1:] {
				if math.Abs(e.Value-*a.Value) > math.Abs(worst.Value-*a.Value) {
					worst = e
				}
			}
		}
	}
	r.Figure = Figure{Value: worst.Value, Unit: "value",
		Text: fmt.Sprintf("%s (worst, at %s)", FormatValue(worst.Value), FormatOffset(worst.At))}
	r.Extra = []Figure{countFigure("samples", len(samples), "sample"), countFigure("violations", len(bad), "violation")}
	for _, e := range bad {
		r.Evidence = append(r.Evidence, Evidence{At: e.At, Pod: e.Pod,
			Detail: fmt.Sprintf("%s%s = %s", e.Metric, labelString(e.Labels), FormatValue(e.Value))})
	}
	capEvidence(r)
	r.Verdict = verdict(len(bad) == 0)
	r.Message = fmt.Sprintf("%d of %d samples of %s%s in %s broke the condition; worst %s; bound %s",
		len(bad), len(samples), a.Metric, labelString(a.Labels), r.Window, FormatValue(worst.Value), r.Bound)
}

// judgeRecovery measures the time from the fault's end to the first moment
// a condition holds and keeps holding for Hold (default 2s), and compares
// it with Within (docs/DESIGN.md §9). The condition is a metric condition
// (Metric, Labels, Op, Value: every selected series' latest sample
// satisfies it) or a stream condition (Stream with MaxLatency and/or
// MaxRate: each 1 s bucket's p99 and error rate within bounds). The search
// runs until the window's end; the hold may run past it while measurements
// continue. The figure is reported whether the assertion passes or not.
func judgeRecovery(in *input, a scenario.Assertion, r *Result) {
	if a.Within == nil {
		setError(r, "recovery assertion needs within")
		return
	}
	hold := scenario.DefaultHold
	if a.Hold != nil {
		hold = a.Hold.D()
	}
	f := faultOf(in, a)
	if f == "" {
		setError(r, "recovery assertion needs a fault: set fault or use a fault:/recovery: window")
		return
	}
	_, off, ok := faultSpan(in, f)
	if !ok {
		setError(r, "fault %q is neither in the plan nor in the event log", f)
		return
	}
	var cond string
	var at time.Duration
	var found bool
	var note string
	switch {
	case a.Metric != "":
		b, err := metricBound(a)
		if err != nil {
			setError(r, "%v", err)
			return
		}
		cond = b
		at, found, note, err = metricRecovery(in, a, off, hold)
		if err != nil {
			setError(r, "%v", err)
			return
		}
	case a.Stream != "":
		if a.MaxLatency == nil && a.MaxRate == nil {
			setError(r, "recovery on a stream needs maxLatency and/or maxRate")
			return
		}
		var parts []string
		if a.MaxLatency != nil {
			parts = append(parts, "p99 <= "+FormatDuration(a.MaxLatency.D()))
		}
		if a.MaxRate != nil {
			parts = append(parts, "error rate <= "+FormatPercent(*a.MaxRate))
		}
		cond = a.Stream + " " + strings.Join(parts, " and ") + " per 1s"
		s := streamSeries(in, a, r)
		if s == nil {
			return
		}
		// A stream that sent nothing after the fault cannot show recovery
		// (nor its absence).
		if from := max(off, in.win.Start); from >= in.win.End || s.Window(from, in.win.End).Requests == 0 {
			setError(r, "stream %q sent nothing in %s after %s ended (%s): nothing to judge", a.Stream, r.Window, f, FormatOffset(off))
			return
		}
		at, found, note = streamRecovery(in, a, s, off, hold)
	default:
		setError(r, "recovery assertion needs a metric condition (metric, op, value) or a stream condition (stream, maxLatency/maxRate)")
		return
	}
	within := a.Within.D()
	r.Bound = fmt.Sprintf("<= %s (%s, held %s)", FormatDuration(within), cond, FormatDuration(hold))
	if !found {
		limit := in.win.End - off
		if limit < 0 {
			limit = 0
		}
		r.Verdict = Fail
		r.Figure = Figure{Value: round(ms(limit), 3), Unit: "ms", Text: "> " + FormatDuration(limit) + " (not recovered)"}
		r.Message = fmt.Sprintf("%s did not recover after %s off (%s) by the end of %s: %s; bound %s",
			condSubject(a), f, FormatOffset(off), r.Window, note, r.Bound)
		r.Evidence = append(r.Evidence, Evidence{At: off, Detail: note})
		return
	}
	rec := at - off
	r.Figure = durFigure("", rec)
	r.Extra = []Figure{{Name: "recovered at", Value: round(at.Seconds(), 3), Unit: "s", Text: FormatOffset(at)}}
	r.Verdict = verdict(rec <= within)
	r.Message = fmt.Sprintf("%s recovered %s after %s off (at %s), held for %s; bound %s",
		condSubject(a), FormatDuration(rec), f, FormatOffset(at), FormatDuration(hold), r.Bound)
	if note != "" {
		r.Evidence = append(r.Evidence, Evidence{At: at, Detail: note})
	}
}

func condSubject(a scenario.Assertion) string {
	if a.Metric != "" {
		return a.Metric + labelString(a.Labels)
	}
	return a.Stream
}

// metricRecovery finds the first time t >= off at which every series of
// the metric satisfies the condition and keeps satisfying it through
// t+hold. The state at a moment is each series' latest sample; candidates
// are off itself and every sample time after it, up to the window's end.
// A hold is proven only by a sample at or after t+hold.
func metricRecovery(in *input, a scenario.Assertion, off, hold time.Duration) (time.Duration, bool, string, error) {
	samples := metricSamples(in, a.Metric, a.Labels)
	if len(samples) == 0 {
		return 0, false, "", fmt.Errorf("no samples of %s%s in the run", a.Metric, labelString(a.Labels))
	}
	state := map[string]float64{}
	allOK := func() bool {
		if len(state) == 0 {
			return false
		}
		for _, v := range state {
			if ok, _ := compare(a.Op, v, *a.Value); !ok {
				return false
			}
		}
		return true
	}
	i := 0
	for ; i < len(samples) && samples[i].At <= off; i++ {
		state[labelString(samples[i].Labels)] = samples[i].Value
	}
	var cand time.Duration
	holding := allOK()
	if holding {
		cand = off
	}
	last := "no samples after the fault's end"
	for ; i < len(samples); i++ {
		e := samples[i]
		if holding && e.At >= cand+hold {
			return cand, true, fmt.Sprintf("held from %s; sample at %s: %s", FormatOffset(cand), FormatOffset(e.At), FormatValue(e.Value)), nil
		}
		state[labelString(e.Labels)] = e.Value
		ok := allOK()
		switch {
		case ok && !holding:
			if e.At >= in.win.End {
				return 0, false, last, nil
			}
			holding, cand = true, e.At
		case !ok:
			holding = false
			last = fmt.Sprintf("still violated at %s: %s", FormatOffset(e.At), violating(a, state))
		}
	}
	if holding {
		return 0, false, fmt.Sprintf("held from %s but samples end before %s had passed", FormatOffset(cand), FormatDuration(hold)), nil
	}
	return 0, false, last, nil
}

// violating lists the series of state that break the condition.
func violating(a scenario.Assertion, state map[string]float64) string {
	var out []string
	for k, v := range state {
		if ok, _ := compare(a.Op, v, *a.Value); !ok {
			out = append(out, a.Metric+k+" = "+FormatValue(v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// streamRecovery finds the first 1 s bucket at or after the fault's end
// from which every bucket covering hold meets the stream condition (p99
// <= MaxLatency, error rate <= MaxRate; an empty bucket does not).
func streamRecovery(in *input, a scenario.Assertion, s *measure.Series, off, hold time.Duration) (time.Duration, bool, string) {
	good := func(b *measure.Bucket) (bool, string) {
		if b.Requests == 0 {
			return false, fmt.Sprintf("no completed requests in [%s, +%s)", FormatOffset(b.Start), b.Width)
		}
		if a.MaxLatency != nil {
			if p := measure.Quantile(b.Latency, 99); p > a.MaxLatency.D() {
				return false, fmt.Sprintf("p99 %s at %s", FormatDuration(p), FormatOffset(b.Start))
			}
		}
		if a.MaxRate != nil {
			if er := float64(b.Failures()) / float64(b.Requests); er > *a.MaxRate {
				return false, fmt.Sprintf("error rate %s at %s", FormatPercent(er), FormatOffset(b.Start))
			}
		}
		return true, ""
	}
	var bs []*measure.Bucket
	for _, b := range s.Buckets {
		if b.Start+b.Width > off {
			bs = append(bs, b)
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].Start < bs[j].Start })
	last := "no measurements after the fault's end"
	for i, b := range bs {
		if b.Start >= in.win.End {
			break
		}
		ok, why := good(b)
		if !ok {
			last = "last bad bucket: " + why
			continue
		}
		// Does it keep holding through b.Start+hold?
		end := b.Start + hold
		held := true
		covered := b.Start + b.Width
		for j := i + 1; j < len(bs) && bs[j].Start < end; j++ {
			if bs[j].Start != covered { // a gap in the measurements
				held, last = false, fmt.Sprintf("no measurements at %s", FormatOffset(covered))
				break
			}
			if ok, why := good(bs[j]); !ok {
				held, last = false, "last bad bucket: "+why
				break
			}
			covered = bs[j].Start + bs[j].Width
		}
		if held && covered < end {
			held, last = false, fmt.Sprintf("held from %s but measurements end at %s", FormatOffset(b.Start), FormatOffset(covered))
		}
		if held {
			at := b.Start
			if at < off {
				at = off
			}
			return at, true, fmt.Sprintf("every 1s bucket from %s to %s within bounds", FormatOffset(b.Start), FormatOffset(end))
		}
	}
	return 0, false, last
}
