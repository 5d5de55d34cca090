package assert

import (
	"fmt"
	"sort"
	"time"

	"github.com/drillhq/drill/internal/routing"
	"github.com/drillhq/drill/internal/scenario"
)

// judgeUnroutable compares the longest interval inside the window in which
// the service had no replica in routing (no ready endpoint in its
// EndpointSlices, or in drill's local Service in local mode) with
// MaxDuration. With AfterFaultEnd only the time after the fault ended
// counts: the outage a dependency fault left behind (docs/DESIGN.md §10).
func judgeUnroutable(in *input, a scenario.Assertion, r *Result) {
	if a.MaxDuration == nil {
		setError(r, "unroutable assertion needs maxDuration")
		return
	}
	tl := routing.For(in.events, a.Service)
	if len(tl.Changes) == 0 {
		setError(r, "no readiness or endpoint events for service %q: is it watched (a local service, or pods and EndpointSlices in kubernetes mode)?", a.Service)
		return
	}
	from, to := in.win.Start, in.win.End
	scope := "in " + r.Window
	// The bound says what is measured: with afterFaultEnd only the span
	// after the fault ended, so a longer interval in the findings beside
	// it does not read as a contradiction.
	measured := "longest"
	if a.AfterFaultEnd != nil && *a.AfterFaultEnd {
		f := faultOf(in, a)
		if f == "" {
			setError(r, "unroutable assertion with afterFaultEnd needs a fault: set fault or use a fault:/recovery: window")
			return
		}
		_, off, ok := faultSpan(in, f)
		if !ok {
			setError(r, "fault %q is neither in the plan nor in the event log", f)
			return
		}
		if off > from {
			from = off
		}
		scope = fmt.Sprintf("after %s ended (%s) in %s", f, FormatOffset(off), r.Window)
		measured = fmt.Sprintf("longest after %s ended", f)
	}
	bound := a.MaxDuration.D()
	r.Bound = fmt.Sprintf("%s <= %s", measured, FormatDuration(bound))
	ivs := tl.Unroutable(from, to)
	var longest, total time.Duration
	for _, iv := range ivs {
		total += iv.Len()
		if iv.Len() > longest {
			longest = iv.Len()
		}
		r.Evidence = append(r.Evidence, Evidence{At: iv.Start,
			Detail: fmt.Sprintf("no ready replica in the %s from %s to %s (%s)", tl.Source, FormatOffset(iv.Start), FormatOffset(iv.End), FormatDuration(iv.Len()))})
	}
	r.Figure = durFigure("", longest)
	r.Extra = []Figure{durFigure("total", total), countFigure("intervals", len(ivs), "interval")}
	r.Verdict = verdict(longest <= bound)
	if len(ivs) == 0 {
		r.Figure.Text = "0s (always routable)"
		r.Message = fmt.Sprintf("%s always had a ready replica in the %s %s", a.Service, tl.Source, scope)
		return
	}
	r.Message = fmt.Sprintf("%s had no ready replica in the %s for %s at most (%s, %s in all) %s; bound %s",
		a.Service, tl.Source, FormatDuration(longest), plural(len(ivs), "interval"), FormatDuration(total), scope, r.Bound)
	capEvidence(r)
}

// judgeDetection measures the time from the fault's start to the
// service's replicas going unready (their Ready condition turning False),
// within the window, and compares the chosen percentile over the replicas
// (default p100: the last replica) with MaxDuration. A replica that never
// went unready in the window counts as never detected, and fails.
func judgeDetection(in *input, a scenario.Assertion, r *Result) {
	if a.MaxDuration == nil {
		setError(r, "detection assertion needs maxDuration")
		return
	}
	f := faultOf(in, a)
	if f == "" {
		setError(r, "detection assertion needs a fault: set fault or use a fault:/recovery: window")
		return
	}
	on, _, ok := faultSpan(in, f)
	if !ok {
		setError(r, "fault %q is neither in the plan nor in the event log", f)
		return
	}
	tl := routing.For(in.events, a.Service)
	if len(tl.Pods) == 0 {
		setError(r, "no readiness events for service %q: is it watched?", a.Service)
		return
	}
	pct := 100.0
	if a.Percentile != nil {
		pct = float64(*a.Percentile)
	}
	bound := a.MaxDuration.D()
	r.Bound = fmt.Sprintf("%s <= %s after %s began", scenario.Percentile(pct), FormatDuration(bound), f)
	from := on
	if in.win.Start > from {
		from = in.win.Start
	}
	un := routing.Unready(in.events, a.Service, from, in.win.End)
	var ds []time.Duration
	var never []string
	for _, pod := range tl.Pods {
		t, ok := un[pod]
		if !ok {
			never = append(never, pod)
			continue
		}
		ds = append(ds, t-on)
		r.Evidence = append(r.Evidence, Evidence{At: t, Pod: pod,
			Detail: fmt.Sprintf("unready at %s, %s after %s began", FormatOffset(t), FormatDuration(t-on), f)})
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	// Replicas never detected rank last: the percentile reaches them only
	// when it covers more replicas than were detected.
	need := int(float64(len(tl.Pods))*pct/100 + 0.999999)
	if need < 1 {
		need = 1
	}
	r.Extra = []Figure{countFigure("replicas unready", len(ds), "replica"), countFigure("replicas", len(tl.Pods), "replica")}
	if len(ds) > 0 {
		r.Extra = append(r.Extra, durFigure("first", ds[0]), durFigure("last", ds[len(ds)-1]))
	}
	for _, pod := range never {
		r.Evidence = append(r.Evidence, Evidence{At: in.win.End, Pod: pod,
			Detail: fmt.Sprintf("never went unready between %s and %s", FormatOffset(from), FormatOffset(in.win.End))})
	}
	if need > len(ds) {
		r.Verdict = Fail
		r.Figure = Figure{Value: -1, Unit: "ms", Text: "never"}
		r.Message = fmt.Sprintf("%d of %d replicas of %s never went unready in %s after %s began; bound %s",
			len(never), len(tl.Pods), a.Service, r.Window, f, r.Bound)
		capEvidence(r)
		return
	}
	fig := ds[need-1]
	r.Figure = durFigure("", fig)
	r.Verdict = verdict(fig <= bound)
	r.Message = fmt.Sprintf("%s detection of %s by %s: %s (%d of %d replicas unready in %s); bound %s",
		scenario.Percentile(pct), f, a.Service, FormatDuration(fig), len(ds), len(tl.Pods), r.Window, r.Bound)
	capEvidence(r)
}
