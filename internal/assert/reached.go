package assert

import (
	"fmt"
	"math"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// judgeReached passes when at least one sample of Metric (series selected
// by Labels) in the window satisfies Op Value. The figure is the first
// sample that does, else the closest one: the largest for > and >=, the
// smallest for < and <=, the nearest to Value for == and !=. No sample in
// the window is an error.
func judgeReached(in *input, a scenario.Assertion, r *Result) {
	bound, err := metricBound(a)
	if err != nil {
		setError(r, "%v", err)
		return
	}
	r.Bound = "some sample " + bound
	samples := windowSamples(in, a, r)
	if samples == nil {
		return
	}
	var hit *event.Event
	hits := 0
	closest := samples[0]
	for i, e := range samples {
		if ok, _ := compare(a.Op, e.Value, *a.Value); ok {
			if hit == nil {
				hit = &samples[i]
			}
			hits++
		}
		if closer(a.Op, e.Value, closest.Value, *a.Value) {
			closest = e
		}
	}
	r.Extra = []Figure{countFigure("samples", len(samples), "sample"), countFigure("reaching", hits, "sample")}
	series := a.Metric + labelString(a.Labels)
	if hit == nil {
		r.Verdict = Fail
		r.Figure = Figure{Value: closest.Value, Unit: "value",
			Text: fmt.Sprintf("%s (closest, at %s)", FormatValue(closest.Value), FormatOffset(closest.At))}
		r.Evidence = append(r.Evidence, Evidence{At: closest.At, Pod: closest.Pod,
			Detail: fmt.Sprintf("closest sample %s%s = %s", closest.Metric, labelString(closest.Labels), FormatValue(closest.Value))})
		r.Message = fmt.Sprintf("none of %d samples of %s in %s reached the level; closest %s at %s; bound %s",
			len(samples), series, r.Window, FormatValue(closest.Value), FormatOffset(closest.At), r.Bound)
		return
	}
	r.Verdict = Pass
	r.Figure = Figure{Value: hit.Value, Unit: "value",
		Text: fmt.Sprintf("%s (first, at %s)", FormatValue(hit.Value), FormatOffset(hit.At))}
	r.Message = fmt.Sprintf("%d of %d samples of %s in %s reached the level, first %s at %s; bound %s",
		hits, len(samples), series, r.Window, FormatValue(hit.Value), FormatOffset(hit.At), r.Bound)
}

// closer reports whether v is closer than best to reaching op bound.
func closer(op string, v, best, bound float64) bool {
	switch op {
	case ">", ">=":
		return v > best
	case "<", "<=":
		return v < best
	}
	return math.Abs(v-bound) < math.Abs(best-bound)
}
