package scenario

import (
	"sort"
	"time"
)

// Span is a named window [From, To) on the run's clock (offsets from t=0).
type Span struct {
	Name     string
	From, To time.Duration
	// Fault is the fault a fault:/recovery: window belongs to.
	Fault string
}

// Window name prefixes and fixed names.
const (
	WindowRun      = "run"
	WindowBaseline = "baseline"
	PrefixFault    = "fault:"
	PrefixRecovery = "recovery:"
)

// Spans derives the scenario's windows from its timeline (after
// [Scenario.SetDefaults]):
//
//   - run = [warmup, duration)
//   - baseline = [warmup, first fault on), absent without faults or when
//     the first fault starts at the end of warmup
//   - fault:<name> = [at, at+for) for each fault
//   - recovery:<name> = [at+for, min(at+for+timeline.recovery, duration)),
//     absent when the fault ends with the run
//   - each timeline.windows entry = [from, to)
//
// Order: run, baseline, then fault and recovery windows by start time, then
// user windows by start time. Windows of an invalid scenario may be empty or
// reversed; [Scenario.Validate] reports those.
func (s *Scenario) Spans() []Span {
	t := s.Timeline
	out := []Span{{Name: WindowRun, From: t.Warmup.D(), To: t.Duration.D()}}
	if len(s.Faults) > 0 {
		first := t.Duration.D()
		for _, f := range s.Faults {
			if f.Scheduled() {
				first = min(first, f.At.D())
			}
		}
		if first > t.Warmup.D() {
			out = append(out, Span{Name: WindowBaseline, From: t.Warmup.D(), To: first})
		}
	}
	var faults []Span
	for _, f := range s.Faults {
		on, off := manualSpan(f, t)
		faults = append(faults, Span{Name: PrefixFault + f.Name, From: on, To: off, Fault: f.Name})
		if end := min(off+t.Recovery.D(), t.Duration.D()); end > off {
			faults = append(faults, Span{Name: PrefixRecovery + f.Name, From: off, To: end, Fault: f.Name})
		}
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].From < faults[j].From })
	out = append(out, faults...)
	var user []Span
	for _, w := range t.Windows {
		user = append(user, Span{Name: w.Name, From: w.From.D(), To: w.To.D()})
	}
	sort.SliceStable(user, func(i, j int) bool { return user[i].From < user[j].From })
	return append(out, user...)
}
