package cpuuse

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Saturated is the machine-wide busy share from which a span counts as
// saturated: every core was busy nearly all the time, so a part that
// wanted more CPU waited for it.
const Saturated = 0.9

// Usage is where a run's CPU went, as run.json records it (`cpu`).
type Usage struct {
	// Cores is the number of cores /proc/stat counts (the machine's, or
	// the VM's; a container's CPU limit is not applied to it).
	Cores int `json:"cores"`
	// From and To are the run-clock offsets (ns, t=0 when load started)
	// of the first and the last sample.
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
	// CapacitySeconds is the CPU time all cores had between the samples
	// (Cores x (To-From)), in CPU seconds.
	CapacitySeconds float64 `json:"capacitySeconds"`
	// BusySeconds is the machine-wide busy time in it (every process,
	// drill's run or not, and the kernel), in CPU seconds: the capacity
	// less the idle and iowait time /proc/stat counted, and at least the
	// parts' sum; Busy is BusySeconds/CapacitySeconds (0..1).
	BusySeconds float64 `json:"busySeconds"`
	Busy        float64 `json:"busy"`
	// StealSeconds is the part of BusySeconds a hypervisor gave to other
	// guests (counted busy: it was not the run's to use).
	StealSeconds float64 `json:"stealSeconds,omitempty"`
	// Parts are the run's parts, in the summary's order.
	Parts []PartUsage `json:"parts"`
	// DrillWaitSeconds is the time drill's threads spent runnable but
	// waiting for a CPU over the span, summed over its threads
	// (thread-seconds, from /proc/self/task/*/schedstat): the time the
	// generator and the clock that judges it lost to other work on the
	// cores. Absent where the kernel does not expose it.
	DrillWaitSeconds *float64 `json:"drillWaitSeconds,omitempty"`
	// DrillAllocObjects and DrillAllocBytes are the heap allocations of
	// drill's own process over the span (runtime/metrics): with the
	// requests sent, its allocations per request, to set beside `drill
	// load` alone at the same rate.
	DrillAllocObjects uint64 `json:"drillAllocObjects,omitempty"`
	DrillAllocBytes   uint64 `json:"drillAllocBytes,omitempty"`
	// Seconds are the per-second samples, in order.
	Seconds []Second `json:"seconds,omitempty"`
	// Problems are samples that could not be read (the figures cover the
	// rest).
	Problems []string `json:"problems,omitempty"`
}

// PartUsage is one part's CPU over the sampled span.
type PartUsage struct {
	// Name and Kind are the [Part]'s.
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Seconds is the CPU time the part used (user+system), in seconds;
	// Share is Seconds/CapacitySeconds (0..1).
	Seconds float64 `json:"seconds"`
	Share   float64 `json:"share"`
	// Processes is the number of root processes (replicas) at the last
	// sample; 0 for drill itself.
	Processes int `json:"processes,omitempty"`
	// Note says what the figure covers.
	Note string `json:"note,omitempty"`
}

// Second is the CPU of one sampling interval (about one second).
type Second struct {
	// At is the run-clock offset (ns) of the interval's start.
	At time.Duration `json:"at"`
	// Busy is the machine's busy share in it (0..1).
	Busy float64 `json:"busy"`
	// Parts are the parts' shares of the machine in it, in [Usage.Parts]
	// order (0..1).
	Parts []float64 `json:"parts"`
	// DrillWait is the time drill's threads waited for a CPU in it,
	// summed over threads (thread-seconds; above the interval's length
	// when several waited at once). 0 where [Usage.DrillWaitSeconds] is
	// absent.
	DrillWait float64 `json:"drillWait,omitempty"`
}

// Other is the busy share no part of the run accounts for: other
// processes on the machine, and kernel work not charged to a process.
func (u *Usage) Other() float64 {
	o := u.Busy
	for _, p := range u.Parts {
		o -= p.Share
	}
	return max(round3(o), 0)
}

// Line says in one line how busy the machine was and each part's share
// of it, e.g. "2 cores 88% busy over 60.0 s: drill 52%, order-gateway
// replicas 30%, postgres 4%, other 2%".
func (u *Usage) Line() string {
	if u == nil || u.Cores == 0 {
		return "not measured"
	}
	span := (u.To - u.From).Seconds()
	parts := make([]float64, len(u.Parts))
	for i, p := range u.Parts {
		parts[i] = p.Share
	}
	return fmt.Sprintf("%s over %.1f s: %s", u.busyWords(u.Busy), span, u.split(parts, u.Other()))
}

// WaitWords says how long drill's threads waited for a CPU over the run,
// e.g. "drill's threads waited 14.2 s for a CPU in all" (in ms below
// 1 s: "... waited 12 ms ..."); "" where it was not measured.
func (u *Usage) WaitWords() string {
	if u == nil || u.DrillWaitSeconds == nil {
		return ""
	}
	w := *u.DrillWaitSeconds
	if w < 1 {
		return fmt.Sprintf("drill's threads waited %s for a CPU in all", ms(w))
	}
	return fmt.Sprintf("drill's threads waited %.1f s for a CPU in all", w)
}

// busyWords is "2 cores 88% busy" or "2 cores saturated (97% busy)".
func (u *Usage) busyWords(busy float64) string {
	cores := fmt.Sprintf("%d cores", u.Cores)
	if u.Cores == 1 {
		cores = "1 core"
	}
	if busy >= Saturated {
		return fmt.Sprintf("%s saturated (%s busy)", cores, pct(busy))
	}
	return fmt.Sprintf("%s %s busy", cores, pct(busy))
}

// split lists each part's share and other's, e.g. "drill 52%, postgres 8%,
// other 2%".
func (u *Usage) split(parts []float64, other float64) string {
	var b strings.Builder
	for i, p := range u.Parts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", p.Name, pct(parts[i]))
	}
	if b.Len() > 0 {
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "other %s", pct(other))
	return b.String()
}

// pct writes a share as a whole percentage ("52%"), "<1%" for a share
// above 0 that rounds to 0.
func pct(v float64) string {
	if v > 0 && v < 0.005 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// Busiest returns up to n seconds with the highest busy share, busiest
// first (earlier first among equals).
func (u *Usage) Busiest(n int) []Second {
	if u == nil {
		return nil
	}
	s := append([]Second(nil), u.Seconds...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Busy > s[j].Busy })
	return s[:min(n, len(s))]
}

// SecondAt returns the sampled second holding offset at.
func (u *Usage) SecondAt(at time.Duration) (Second, bool) {
	if u == nil {
		return Second{}, false
	}
	for i, s := range u.Seconds {
		end := u.To
		if i+1 < len(u.Seconds) {
			end = u.Seconds[i+1].At
		}
		if at >= s.At && at < end {
			return s, true
		}
	}
	return Second{}, false
}

// secondWords says what the machine did in s, e.g. "2 cores saturated
// (100% busy): drill 60%, order-gateway replicas 38%, other 2%".
func (u *Usage) secondWords(s Second) string {
	other := s.Busy
	for _, p := range s.Parts {
		other -= p
	}
	w := u.busyWords(s.Busy) + ": " + u.split(s.Parts, max(round3(other), 0))
	if u.DrillWaitSeconds != nil {
		w += fmt.Sprintf(", drill's threads waited %s for a CPU", ms(s.DrillWait))
	}
	return w
}

// ms writes seconds as whole milliseconds ("380 ms").
func ms(sec float64) string { return fmt.Sprintf("%.0f ms", 1000*sec) }

// HardlyWaited is the run-queue wait (s, summed over drill's threads)
// below which a second in which drill fell behind counts as drill's own
// work rather than a wait for a core: a late request is at least the
// lag budget (10 ms in the seeds) late, so a wait this short cannot
// account for many.
const HardlyWaited = 0.02

// Explain says, for a run whose load generator fell behind, what the
// machine was doing and what to try. lateAt is the start of the second
// in which most late requests were due (negative: unknown). The text is
// one line of clauses joined by "; ".
func (u *Usage) Explain(lateAt time.Duration) string {
	if u == nil || u.Cores == 0 {
		return ""
	}
	var parts []string
	line := "the machine over the run: " + u.Line()
	if w := u.WaitWords(); w != "" {
		line += "; " + w
	}
	parts = append(parts, line)
	ownWork := false
	if lateAt >= 0 {
		if s, ok := u.SecondAt(lateAt); ok {
			parts = append(parts, fmt.Sprintf("in %s, where most late requests were due: %s", span(s.At), u.secondWords(s)))
			ownWork = u.DrillWaitSeconds != nil && s.DrillWait < HardlyWaited
		}
	}
	if ownWork {
		parts = append(parts, "drill hardly waited for a CPU there, so it fell behind on its own work, not for want of a core: `drill run --cpuprofile FILE` shows which part (go tool pprof -tags FILE)")
	}
	if b := u.Busiest(1); len(b) == 1 && b[0].Busy >= Saturated && (lateAt < 0 || b[0].At != secondStart(u, lateAt)) {
		parts = append(parts, fmt.Sprintf("busiest second %s: %s", span(b[0].At), u.secondWords(b[0])))
	}
	parts = append(parts, "to try: "+u.advice())
	return strings.Join(parts, "; ")
}

// secondStart is the start of the sampled second holding at (-1 if none).
func secondStart(u *Usage, at time.Duration) time.Duration {
	if s, ok := u.SecondAt(at); ok {
		return s.At
	}
	return -1
}

// span writes the second starting at offset at ("t=35.0-36.0 s").
func span(at time.Duration) string {
	return fmt.Sprintf("t=%.1f-%.1f s", at.Seconds(), (at + time.Second).Seconds())
}

// advice names what to try, the busiest consumer first: other work on
// the machine, each service's replicas and each dependency that used at
// least a tenth of the machine over the run, ordered by that share, each
// with its share and its busiest second. drill's own share is not among
// them: it is the load being generated (Explain says when drill fell
// behind on its own work).
func (u *Usage) advice() string {
	type consumer struct {
		share float64
		tip   string
	}
	var cs []consumer
	saturated := u.Busy >= Saturated
	if other := u.Other(); other >= 0.1 {
		cs = append(cs, consumer{other, fmt.Sprintf("other work used %s of the machine: run on a quiet machine", pct(other))})
	}
	for i, p := range u.Parts {
		if p.Share < 0.1 || (p.Kind != KindService && p.Kind != KindDependency) {
			continue
		}
		used := pct(p.Share) + u.peakWords(i)
		switch p.Kind {
		case KindService:
			name := strings.TrimSuffix(p.Name, " replicas")
			tip := "fewer replicas of " + name
			if p.Processes > 0 {
				tip = fmt.Sprintf("fewer replicas of %s (%d now)", name, p.Processes)
			}
			cs = append(cs, consumer{p.Share, tip + " or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used " + used})
		case KindDependency:
			cs = append(cs, consumer{p.Share, fmt.Sprintf("less work for %s (a lower rate on the streams whose requests reach it, or fewer replicas querying it): it used %s", p.Name, used)})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].share > cs[j].share })
	tips := make([]string, 0, len(cs)+2)
	for _, c := range cs {
		tips = append(tips, c.tip)
	}
	if !saturated {
		tips = append(tips, fmt.Sprintf("the machine was not saturated (%s busy), so look at the busiest seconds and at the stream's worker cap", pct(u.Busy)))
	}
	if saturated {
		tips = append(tips, "a machine with more cores")
	}
	tips = append(tips, "a longer lagBudget only if the machine is known to be slow")
	return strings.Join(tips, ", ")
}

// peakWords says part i's largest share in any sampled second, e.g.
// " (78% in t=25.0-26.0 s)"; "" when no sampled second had it at least
// [peakAbove] above its share over the run (a steady part's peak says
// nothing more).
func (u *Usage) peakWords(i int) string {
	best, at, found := 0.0, time.Duration(0), false
	for _, s := range u.Seconds {
		if i < len(s.Parts) && s.Parts[i] > best {
			best, at, found = s.Parts[i], s.At, true
		}
	}
	if !found || best < u.Parts[i].Share+peakAbove {
		return ""
	}
	return fmt.Sprintf(" (%s in %s)", pct(best), span(at))
}

// peakAbove is how far above a part's share over the run (0..1 of the
// machine) its busiest second must be for the advice to name it.
const peakAbove = 0.1
