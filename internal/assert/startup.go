package assert

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// isGateCheck reports whether e is a result of a service's startup gate:
// its startup probe, or the container engine's healthcheck (which asks
// the gate in ADR 0077's decision).
func isGateCheck(e event.Event) bool {
	return e.Kind == event.ProbeResult && (e.Probe == event.ProbeStartup || e.Probe == event.ProbeHealthcheck)
}

// gateProcess is one process of a replica: from its start to the next.
type gateProcess struct {
	pod       string
	start     time.Duration // first event of the process when no start was seen
	checks    int
	passes    int
	passed    bool
	firstPass time.Duration
	failed    []time.Duration // gate checks failing after the first pass
	lastFail  string          // the last failure's output
}

// judgeStartupGate checks the service's startup gate (ADR 0077 /startupz)
// over the whole run, bring-up included: each replica process's gate
// checks (startup probe or healthcheck results; a PodStarted begins a new
// process) must pass once, before t=0 for the processes up before load,
// and never fail after that first pass. With Proxy, the first pass of
// each process up before load must come at or after the dependency's
// first answer through that proxy (the [event.DependencyAnswered] event);
// a run whose Toxiproxy has no live counters cannot tell (Verdict Error).
// Figure: the violations, bound 0.
func judgeStartupGate(in *input, a scenario.Assertion, r *Result) {
	pods, ok := servicePods(in, a, r)
	if !ok {
		return
	}
	var answered time.Duration
	haveAnswer, counterless := false, false
	var procs []*gateProcess
	current := map[string]*gateProcess{}
	for _, e := range in.events {
		if e.At >= in.win.End {
			break
		}
		if a.Proxy != "" && e.Labels["proxy"] == a.Proxy {
			switch {
			case e.Kind == event.DependencyAnswered && !haveAnswer:
				answered, haveAnswer = e.At, true
			case e.Kind == event.Note:
				counterless = true
			}
		}
		if !pods[e.Pod] {
			continue
		}
		p := current[e.Pod]
		if e.Kind == event.PodStarted || (p == nil && isGateCheck(e)) {
			p = &gateProcess{pod: e.Pod, start: e.At}
			current[e.Pod] = p
			procs = append(procs, p)
		}
		if !isGateCheck(e) {
			continue
		}
		p.checks++
		if e.OK {
			p.passes++
		}
		switch {
		case e.OK && !p.passed:
			p.passed, p.firstPass = true, e.At
		case !e.OK && p.passed:
			p.failed = append(p.failed, e.At)
			p.lastFail = e.Detail
		}
	}
	r.Bound = "0 violations"
	checks := 0
	for _, p := range procs {
		checks += p.checks
	}
	if checks == 0 {
		setError(r, "no startup gate checks of %s (startup probe or healthcheck results) in the run: has it a startup probe or a healthcheck?", a.Service)
		return
	}
	if a.Proxy != "" && !haveAnswer && counterless {
		setError(r, "proxy %s has no live byte counters, so when its dependency first answered is not known (the run's own Toxiproxy has them)", a.Proxy)
		return
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].start < procs[j].start })
	var problems []string
	violations := 0
	for _, p := range procs {
		var bad []string
		switch {
		case p.checks == 0:
			bad = append(bad, "no gate check ran")
		case !p.passed:
			bad = append(bad, fmt.Sprintf("never passed its gate (%s)", plural(p.checks, "check")))
		default:
			if p.start < 0 && p.firstPass >= 0 {
				bad = append(bad, fmt.Sprintf("up before load but passed its gate only at %s, after t=0", FormatOffset(p.firstPass)))
			}
			if a.Proxy != "" && p.start < 0 {
				switch {
				case !haveAnswer:
					bad = append(bad, fmt.Sprintf("passed its gate at %s though its dependency never answered through proxy %s", FormatOffset(p.firstPass), a.Proxy))
				case p.firstPass < answered:
					bad = append(bad, fmt.Sprintf("passed its gate at %s, %s before its dependency first answered through proxy %s (%s)",
						FormatOffset(p.firstPass), FormatDuration(answered-p.firstPass), a.Proxy, FormatOffset(answered)))
				}
			}
			if n := len(p.failed); n > 0 {
				bad = append(bad, fmt.Sprintf("failed %s after its first pass at %s (first at %s; last: %s)",
					plural(n, "gate check"), FormatOffset(p.firstPass), FormatOffset(p.failed[0]), p.lastFail))
			}
		}
		at := p.start
		if p.passed {
			at = p.firstPass
		}
		if len(bad) > 0 {
			violations += len(bad)
			problems = append(problems, p.pod+" "+bad[0])
			for _, b := range bad {
				r.Evidence = append(r.Evidence, Evidence{At: at, Pod: p.pod, Detail: "process started at " + FormatOffset(p.start) + ": " + b})
			}
			continue
		}
		r.Evidence = append(r.Evidence, Evidence{At: at, Pod: p.pod, Detail: fmt.Sprintf("process started at %s: passed its gate at %s, then %s",
			FormatOffset(p.start), FormatOffset(p.firstPass), plural(p.passes-1, "more passing check"))})
	}
	if len(r.Evidence) > maxEvidence {
		r.Evidence = r.Evidence[:maxEvidence]
	}
	r.Figure = countFigure("", violations, "violation")
	r.Extra = []Figure{countFigure("processes", len(procs), "process")}
	if haveAnswer {
		r.Extra = append(r.Extra, Figure{Name: "dependency answered", Value: round(answered.Seconds(), 3), Unit: "s", Text: FormatOffset(answered)})
	}
	r.Verdict = verdict(violations == 0)
	if violations > 0 {
		r.Message = fmt.Sprintf("the startup gate of %s broke its promise: %s", a.Service, strings.Join(problems, "; "))
		return
	}
	first := procs[0]
	r.Message = fmt.Sprintf("every process of %s (%s) passed its startup gate once and never failed it after; the first at %s",
		a.Service, plural(len(procs), "process"), FormatOffset(first.firstPass))
	if haveAnswer {
		r.Message += fmt.Sprintf(", %s after %s first answered through proxy %s", FormatDuration(first.firstPass-answered), "its dependency", a.Proxy)
	}
}
