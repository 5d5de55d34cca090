package scenario

import (
	"fmt"
	"sort"
	"time"
)

// Timeline fixes the run's length and phases. Offsets are from the start of
// load (t=0). The planner derives windows: baseline = [Warmup, first fault
// on), fault:<name> = [at, at+for), recovery:<name> = [off,
// min(off+Recovery, Duration)), run = [Warmup, Duration).
type Timeline struct {
	// Duration is the whole run from t=0; required, > 0 and at most 24h
	// (longer soaks are several runs).
	Duration Duration `yaml:"duration" json:"duration"`
	// Warmup is excluded from every window; default 0.
	Warmup Duration `yaml:"warmup,omitempty" json:"warmup,omitempty"`
	// Recovery is the length of each recovery:<fault> window; default 10s.
	Recovery Duration `yaml:"recovery,omitempty" json:"recovery,omitempty"`
	// ReadyTimeout bounds the wait for services to become ready before t=0;
	// default 120s.
	ReadyTimeout Duration `yaml:"readyTimeout,omitempty" json:"readyTimeout,omitempty"`
	// Windows are extra named windows, e.g. {name: steady, from: 10s, to: 20s}.
	Windows []WindowSpec `yaml:"windows,omitempty" json:"windows,omitempty"`
}

// WindowSpec is a user-named window [From, To) on the run's clock.
type WindowSpec struct {
	// Name is unique; assertions refer to it. Not run, baseline, fault:* or recovery:*.
	Name string `yaml:"name" json:"name"`
	// From is the window's start from t=0; at or after the warmup.
	From Duration `yaml:"from" json:"from"`
	// To is the window's end from t=0 (excluded); at most the run's duration.
	// User windows must not overlap each other.
	To Duration `yaml:"to" json:"to"`
}

// Upper bounds drill run would otherwise meet only after it started the
// scenario's dependencies and services. Validate (and so drill validate and
// drill plan) refuses anything beyond them before anything starts.
const (
	// MaxRunDuration bounds timeline.duration (and so every offset inside
	// it): 24 h. A drill is a bounded experiment (the longest game day is
	// a working day); every stream keeps one measurement bucket per second
	// for the whole run, in memory and in run.json, and the fault journal
	// keeps a fault's leftovers until the run ends, so a mistyped unit
	// (87600h for 87.6s) must not start a run that never ends.
	MaxRunDuration = 24 * time.Hour
)

func (v *validator) timeline() {
	t := v.s.Timeline
	if t.Duration.D() <= 0 {
		v.errorf("timeline.duration", "duration must be above 0")
		return
	}
	if t.Duration.D() > MaxRunDuration {
		v.errorf("timeline.duration", "duration %s is longer than drill's limit of %s for one run; split a longer soak into several runs", t.Duration.D(), MaxRunDuration)
		return
	}
	if t.Warmup.D() >= t.Duration.D() {
		v.errorf("timeline.warmup", "warmup (%s) must end before the run does (duration %s)", t.Warmup.D(), t.Duration.D())
	}
	names := make([]string, len(t.Windows))
	for i, w := range t.Windows {
		names[i] = w.Name
	}
	v.unique("window", names, func(i int) string { return fmt.Sprintf("timeline.windows[%d]", i) })
	for i, w := range t.Windows {
		p := fmt.Sprintf("timeline.windows[%d]", i)
		if w.Name == WindowRun || w.Name == WindowBaseline {
			v.errorf(p+".name", "window name %q is reserved (drill defines run, baseline, fault:<name> and recovery:<name>)", w.Name)
		}
		switch {
		case w.To.D() <= w.From.D():
			v.errorf(p+".to", "window ends (%s) at or before it starts (%s)", w.To.D(), w.From.D())
		case w.From.D() < t.Warmup.D():
			v.errorf(p+".from", "window starts (%s) inside the warmup (%s); windows exclude the warmup", w.From.D(), t.Warmup.D())
		case w.To.D() > t.Duration.D():
			v.errorf(p+".to", "window ends (%s) after the run (duration %s)", w.To.D(), t.Duration.D())
		}
	}
	// User windows must not overlap each other.
	idx := make([]int, len(t.Windows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return t.Windows[idx[a]].From.D() < t.Windows[idx[b]].From.D() })
	for k := 1; k < len(idx); k++ {
		prev, cur := t.Windows[idx[k-1]], t.Windows[idx[k]]
		if cur.From.D() < prev.To.D() && prev.To.D() > prev.From.D() && cur.To.D() > cur.From.D() {
			v.errorf(fmt.Sprintf("timeline.windows[%d]", idx[k]), "window %q [%s, %s) overlaps window %q [%s, %s)",
				cur.Name, cur.From.D(), cur.To.D(), prev.Name, prev.From.D(), prev.To.D())
		}
	}
}
