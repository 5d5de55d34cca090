// Package assert judges a drill's assertions. Every assertion is a pure
// function of the plan (its windows), the run's event log and the load
// streams' per-second measurements: given a recorded run it gives the same
// verdict, so `drill report run.json` can re-judge a saved run and tests can
// feed hand-made logs (docs/DESIGN.md §9).
//
// One registry maps each [scenario.AssertionType] to its judge; [Judge]
// runs them all and returns one [Result] per assertion, in order. A result
// carries the verdict, the measured figure with its unit, the bound, the
// window and the evidence (which pod, when, why) an SRE needs to act.
package assert

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// Verdict is an assertion's outcome.
type Verdict string

// Verdicts.
const (
	// Pass: the figure is within the bound.
	Pass Verdict = "pass"
	// Fail: the figure breaks the bound (exit code 1).
	Fail Verdict = "fail"
	// Error: the assertion could not be judged (no data, unknown window,
	// missing bound); no verdict can be trusted (exit code 4).
	Error Verdict = "error"
	// Aborted: the run's timeline ended (signal, stop condition, error)
	// before the assertion's window did, so the window was cut short and
	// is not judged: never a pass. The run's exit code is 3 when it was
	// aborted, else 4.
	Aborted Verdict = "aborted"
)

// LoadEndDetail is the Detail of the run's PhaseStart event that marks the
// moment its timeline stopped: at or after the plan's duration when it ran
// its full length, earlier when it was cut short. A window ending after it
// gets the verdict [Aborted].
const LoadEndDetail = "load-end"

// Figure is a measured number with its unit and a formatted string for
// people. Durations have Unit "ms" (Value in milliseconds); counts "count";
// ratios 0..1 "ratio"; replicas "replicas"; metric samples "value".
type Figure struct {
	// Name labels a secondary figure (e.g. "max", "detection"); empty for
	// the primary one.
	Name  string  `json:"name,omitempty"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Text is the figure as printed, e.g. "412ms", "0.12% (34/28000)".
	Text string `json:"text"`
}

// String returns f.Text.
func (f Figure) String() string { return f.Text }

// Evidence is one observation behind a verdict: when (run clock offset),
// which pod, what happened, and the log lines that explain it.
type Evidence struct {
	At     time.Duration `json:"at"`
	Pod    string        `json:"pod,omitempty"`
	Detail string        `json:"detail"`
	// Logs are the last lines a replica wrote before the event (restarts).
	Logs []string `json:"logs,omitempty"`
}

// Result is one judged assertion.
type Result struct {
	// Name is the assertion's name (the JUnit test case).
	Name string                 `json:"name"`
	Type scenario.AssertionType `json:"type"`
	// Window is the window's name; WindowStart/WindowEnd its span [start,
	// end) on the run's clock (zero when the window is unknown).
	Window      string        `json:"window"`
	WindowStart time.Duration `json:"windowStart"`
	WindowEnd   time.Duration `json:"windowEnd"`
	// Source is the spec clause the assertion proves (e.g. INV-BH-02).
	Source  string  `json:"source,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Figure is the measured figure the bound is compared with.
	Figure Figure `json:"figure"`
	// Bound is the bound as text, e.g. "<= 120ms", "<= 0 restarts".
	Bound string `json:"bound"`
	// Message says in one sentence what was found.
	Message string `json:"message"`
	// Extra holds secondary figures (e.g. max, detection and return times).
	Extra []Figure `json:"extra,omitempty"`
	// Evidence lists the observations that explain the verdict.
	Evidence []Evidence `json:"evidence,omitempty"`
}

// Passed reports whether r's verdict is Pass.
func (r Result) Passed() bool { return r.Verdict == Pass }

// judgeFunc judges one assertion over its window.
type judgeFunc func(in *input, a scenario.Assertion, r *Result)

// registry is the one table of assertion judges, keyed by type.
func registry() map[scenario.AssertionType]judgeFunc {
	return map[scenario.AssertionType]judgeFunc{
		scenario.AssertRestarts:        judgeRestarts,
		scenario.AssertEndpointRemoval: judgeEndpointRemoval,
		scenario.AssertLatency:         judgeLatency,
		scenario.AssertErrorRate:       judgeErrorRate,
		scenario.AssertThroughput:      judgeThroughput,
		scenario.AssertRecovery:        judgeRecovery,
		scenario.AssertShed:            judgeShed,
		scenario.AssertFlaps:           judgeFlaps,
		scenario.AssertMetric:          judgeMetric,
		scenario.AssertReached:         judgeReached,
		scenario.AssertIsolation:       judgeIsolation,
		scenario.AssertCheck:           judgeCheck,
		scenario.AssertReady:           judgeReady,
		scenario.AssertUnroutable:      judgeUnroutable,
		scenario.AssertDetection:       judgeDetection,
		scenario.AssertReturn:          judgeReturn,
		scenario.AssertStartupGate:     judgeStartupGate,
	}
}

// Types returns every assertion type this package judges, sorted.
func Types() []scenario.AssertionType {
	var out []scenario.AssertionType
	for t := range registry() {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// input is what every judge reads.
type input struct {
	plan   *plan.Plan
	events []event.Event // sorted by At
	series map[string]*measure.Series
	win    plan.Window
}

// Judge judges each assertion over its window and returns one Result per
// assertion, in order. It is pure: it reads p's windows, the events (any
// order; they are sorted by At) and the per-stream series, and changes
// none of them. An assertion that cannot be judged (unknown type or
// window, missing bound, no data) gets Verdict Error and a message saying
// what is missing; one whose window ends after the run's timeline stopped
// (the [LoadEndDetail] event) gets Verdict Aborted and is not judged.
func Judge(p *plan.Plan, assertions []scenario.Assertion, events []event.Event, series map[string]*measure.Series) []Result {
	evs := make([]event.Event, len(events))
	copy(evs, events)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	reg := registry()
	stop, stopped := timelineEnd(evs)
	out := make([]Result, 0, len(assertions))
	for _, a := range assertions {
		r := Result{Name: a.ResolvedName(), Type: a.Type, Window: a.Window, Source: a.Source}
		if r.Window == "" {
			r.Window = scenario.DefaultWindow
		}
		judge, ok := reg[a.Type]
		switch {
		case !ok:
			setError(&r, "unknown assertion type %q; available: %s", a.Type, typeList())
		case p == nil:
			setError(&r, "no plan to judge against")
		default:
			w, err := ResolveWindow(p, r.Window)
			if err != nil {
				setError(&r, "%v", err)
				break
			}
			r.WindowStart, r.WindowEnd = w.Start, w.End
			if stopped && stop < w.End {
				r.Verdict = Aborted
				r.Figure = Figure{Text: "n/a"}
				how := "was cut short"
				if stop <= w.Start {
					how = "never ran"
				}
				r.Message = fmt.Sprintf("not judged: window %s [%s, %s) %s: the run stopped at %s",
					r.Window, FormatOffset(w.Start), FormatOffset(w.End), how, FormatOffset(stop))
				break
			}
			judge(&input{plan: p, events: evs, series: series, win: w}, a, &r)
		}
		out = append(out, r)
	}
	return out
}

// timelineEnd returns when the run's timeline stopped: the last
// LoadEndDetail phase event of evs. ok is false when the log has none (a
// hand-made log), which judges every window.
func timelineEnd(evs []event.Event) (at time.Duration, ok bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if e := evs[i]; e.Kind == event.PhaseStart && e.Source == "run" && e.Detail == LoadEndDetail {
			return e.At, true
		}
	}
	return 0, false
}

func typeList() string {
	var s []string
	for _, t := range Types() {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}

// ResolveWindow finds the window named name in p. Besides the plan's own
// names it accepts "<a>..<b>": from the start of window a to the end of
// window b (e.g. "fault:db-pause..recovery:db-pause", the span over
// which zero restarts is judged, docs/DESIGN.md §9). It returns an error
// listing the known windows when name is unknown.
func ResolveWindow(p *plan.Plan, name string) (plan.Window, error) {
	if w, ok := p.Window(name); ok {
		return w, nil
	}
	if from, to, ok := strings.Cut(name, ".."); ok {
		a, errA := ResolveWindow(p, from)
		if errA != nil {
			return plan.Window{}, errA
		}
		b, errB := ResolveWindow(p, to)
		if errB != nil {
			return plan.Window{}, errB
		}
		if b.End < a.Start {
			return plan.Window{}, fmt.Errorf("window %q ends before it starts", name)
		}
		f := a.Fault
		if f == "" {
			f = b.Fault
		}
		return plan.Window{Name: name, Start: a.Start, End: b.End, Fault: f}, nil
	}
	var names []string
	for _, w := range p.Windows {
		names = append(names, w.Name)
	}
	sort.Strings(names)
	return plan.Window{}, fmt.Errorf("window %q is not in the plan; available: %s", name, strings.Join(names, ", "))
}

func setError(r *Result, format string, args ...any) {
	r.Verdict = Error
	r.Message = fmt.Sprintf(format, args...)
	if r.Figure.Text == "" {
		r.Figure = Figure{Text: "n/a"}
	}
}

// verdict returns Pass when ok, else Fail.
func verdict(ok bool) Verdict {
	if ok {
		return Pass
	}
	return Fail
}

// inWindow reports whether t lies in w = [Start, End).
func inWindow(w plan.Window, t time.Duration) bool { return t >= w.Start && t < w.End }

// phaseAt names the part of the timeline t falls in, most specific first:
// a fault window, a recovery window, a user window, baseline, warm-up, run.
func phaseAt(p *plan.Plan, t time.Duration) string {
	if t < 0 {
		return "bring-up"
	}
	if t < p.Warmup {
		return "warmup"
	}
	rank := func(name string) int {
		switch {
		case strings.HasPrefix(name, "fault:"):
			return 0
		case strings.HasPrefix(name, "recovery:"):
			return 1
		case name == "baseline":
			return 3
		case name == "run":
			return 4
		}
		return 2
	}
	best, bestRank := "", 99
	for _, w := range p.Windows {
		if inWindow(w, t) && rank(w.Name) < bestRank {
			best, bestRank = w.Name, rank(w.Name)
		}
	}
	if best != "" {
		return best
	}
	if p.Duration > 0 && t >= p.Duration {
		return "after-run"
	}
	return "run"
}

// faultSpan returns when fault name was on and off: from the FaultOn and
// FaultOff events when present (the actual times), else from the plan's
// fault:<name> window. ok is false when neither knows the fault.
func faultSpan(in *input, name string) (on, off time.Duration, ok bool) {
	var haveOn, haveOff bool
	for _, e := range in.events {
		if e.Fault != name {
			continue
		}
		if e.Kind == event.FaultOn && !haveOn {
			on, haveOn = e.At, true
		}
		if e.Kind == event.FaultOff && haveOn && !haveOff && e.At >= on {
			off, haveOff = e.At, true
		}
	}
	w, inPlan := in.plan.Window("fault:" + name)
	if !haveOn && inPlan {
		on, haveOn = w.Start, true
	}
	if !haveOff && inPlan {
		off, haveOff = w.End, true
	}
	return on, off, haveOn && haveOff
}

// faultOf picks the fault an assertion is about: a.Fault, else the
// window's fault, else the only fault of the plan, else the first fault
// turned on inside the window.
func faultOf(in *input, a scenario.Assertion) string {
	if a.Fault != "" {
		return a.Fault
	}
	if in.win.Fault != "" {
		return in.win.Fault
	}
	var only, first string
	n := 0
	var firstStart time.Duration
	for _, w := range in.plan.Windows {
		f, ok := strings.CutPrefix(w.Name, "fault:")
		if !ok {
			continue
		}
		n++
		only = f
		if inWindow(in.win, w.Start) && (first == "" || w.Start < firstStart) {
			first, firstStart = f, w.Start
		}
	}
	if n == 1 {
		return only
	}
	return first
}
