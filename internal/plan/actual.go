package plan

import (
	"sort"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// FollowOperators applies [Plan.FollowActual] to the faults declared
// manual (at: manual or for: manual) and to those an operator acted on in
// events (started, ended, held, released; all of them after an operator
// stopped the load or aborted), so that assertions judge the windows that
// really were.
func (p *Plan) FollowOperators(faults []scenario.Fault, events []event.Event, recovery time.Duration) {
	follow := map[string]bool{}
	for _, f := range faults {
		if f.ManualStart || f.ManualEnd {
			follow[f.Name] = true
		}
	}
	for _, e := range events {
		switch {
		case e.Kind == event.Operator && e.Fault != "":
			follow[e.Fault] = true
		case e.Kind == event.Operator && (e.Reason == "stop" || e.Reason == "abort"):
			for _, f := range faults {
				follow[f.Name] = true
			}
		}
	}
	p.FollowActual(follow, events, recovery)
}

// FollowActual moves the windows and actions of the named faults to the
// times they actually went on and off in events (an operator started,
// ended or held them): fault:<name> = [on, off), recovery:<name> = [off,
// min(off+recovery, duration)), and the baseline ends at the first fault
// actually on. A fault that never went on keeps an empty window at the
// run's end; one never turned off ends at the run's end. Faults not named
// keep their planned windows.
func (p *Plan) FollowActual(faults map[string]bool, events []event.Event, recovery time.Duration) {
	if len(faults) == 0 {
		return
	}
	on, off := map[string]time.Duration{}, map[string]time.Duration{}
	first := time.Duration(-1)
	for _, e := range events {
		switch e.Kind {
		case event.FaultOn:
			if _, seen := on[e.Fault]; !seen {
				on[e.Fault] = e.At
				if first < 0 || e.At < first {
					first = e.At
				}
			}
		case event.FaultOff:
			if _, seen := off[e.Fault]; !seen {
				off[e.Fault] = e.At
			}
		}
	}
	span := func(name string) (time.Duration, time.Duration, bool) {
		a, ok := on[name]
		if !ok {
			return p.Duration, p.Duration, false
		}
		b, ok := off[name]
		if !ok || b > p.Duration {
			b = p.Duration
		}
		return a, max(a, b), true
	}
	for i := range p.Windows {
		w := &p.Windows[i]
		switch {
		case w.Name == "baseline" && first >= 0:
			w.End = max(w.Start, first)
		case w.Fault != "" && faults[w.Fault] && w.Name == "fault:"+w.Fault:
			w.Start, w.End, _ = span(w.Fault)
		case w.Fault != "" && faults[w.Fault] && w.Name == "recovery:"+w.Fault:
			_, end, _ := span(w.Fault)
			w.Start, w.End = end, max(end, min(end+recovery, p.Duration))
		}
	}
	var kept []Action
	detail := map[string]string{}
	for _, a := range p.Actions {
		if (a.Kind == FaultOn || a.Kind == FaultOff) && faults[a.Target] {
			if a.Kind == FaultOn {
				detail[a.Target] = a.Detail
			}
			continue
		}
		kept = append(kept, a)
	}
	for name := range faults {
		a, b, ok := span(name)
		if !ok {
			continue
		}
		kept = append(kept, Action{At: a, Kind: FaultOn, Target: name, Detail: detail[name]}, Action{At: b, Kind: FaultOff, Target: name})
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if kept[i].At != kept[j].At {
			return kept[i].At < kept[j].At
		}
		return actionOrder[kept[i].Kind] < actionOrder[kept[j].Kind]
	})
	p.Actions = kept
}
