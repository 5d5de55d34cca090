package placement

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Report says what a [Placement] applied, for run.json and the summary.
type Report struct {
	// Mode is cgroup-v1, cgroup-v2, nice or same.
	Mode Mode `json:"mode"`
	// Cgroup is the run's cgroup directory ("" when none was made).
	Cgroup string `json:"cgroup,omitempty"`
	// WeightFile is cpu.shares (v1) or cpu.weight (v2) when the system
	// under test got a lower weight; SUTWeight is its value in the run's
	// cgroup, DrillWeight the value of drill's own cgroup.
	WeightFile  string `json:"weightFile,omitempty"`
	SUTWeight   int    `json:"sutWeight,omitempty"`
	DrillWeight int    `json:"drillWeight,omitempty"`
	// Nice is the nice value of the system under test (ModeNice).
	Nice int `json:"nice,omitempty"`
	// Limits are the services' CPU limits and whether each was applied.
	Limits []Limit `json:"limits,omitempty"`
	// NoCgroup says why no cgroup was used ("" when one was, or none was
	// needed).
	NoCgroup string `json:"noCgroup,omitempty"`
	// Line is the summary's one-line account of all of it.
	Line string `json:"line"`
}

// Limit is one service's CPU limit.
type Limit struct {
	Service string `json:"service"`
	// CPU is the limit as written ("500m"); Cores the same in cores.
	CPU   string  `json:"cpu"`
	Cores float64 `json:"cores"`
	// QuotaMicros per PeriodMicros is the CFS quota of each replica, in
	// microseconds (0 when not applied).
	QuotaMicros  int64 `json:"quotaMicros,omitempty"`
	PeriodMicros int64 `json:"periodMicros,omitempty"`
	// Applied is false where drill could not create cgroups.
	Applied bool `json:"applied"`
}

// Report says what p applied.
func (p *Placement) Report() Report {
	if p == nil {
		return Report{Mode: ModeSame, Line: "replicas and dependencies at drill's own CPU weight"}
	}
	r := Report{Mode: p.mode, Cgroup: p.Cgroup(), NoCgroup: p.why}
	name := filepath.Base(p.top)
	var parts []string
	switch {
	case p.created && p.cfg.Lower:
		r.WeightFile, r.SUTWeight = "cpu.shares", SUTShares()
		if p.v2 {
			r.WeightFile, r.SUTWeight = "cpu.weight", SUTWeight
		}
		r.DrillWeight = p.drill
		parts = append(parts, fmt.Sprintf("replicas and dependencies in cgroup %s (%s %d vs drill %d)", name, r.WeightFile, r.SUTWeight, r.DrillWeight))
	case p.mode == ModeNice:
		r.Nice = SUTNice
		parts = append(parts, fmt.Sprintf("replicas and dependencies at nice %+d (no writable cgroup: %s)", SUTNice, p.why))
	default:
		parts = append(parts, "replicas and dependencies at drill's own CPU weight (sutPriority: same)")
	}
	services := make([]string, 0, len(p.cfg.Limits))
	for s, q := range p.cfg.Limits {
		if q > 0 {
			services = append(services, s)
		}
	}
	sort.Strings(services)
	var skipped []string
	for _, s := range services {
		q := p.cfg.Limits[s]
		l := Limit{Service: s, CPU: q.String(), Cores: q.Cores(), Applied: p.created}
		if p.created {
			l.QuotaMicros, l.PeriodMicros = Quota(q).Microseconds(), CFSPeriod.Microseconds()
			parts = append(parts, fmt.Sprintf("%s limited to %s CPU per replica (CFS quota %d µs per %d µs)",
				s, strconv.FormatFloat(q.Cores(), 'f', -1, 64), l.QuotaMicros, l.PeriodMicros))
		} else {
			skipped = append(skipped, s+" "+q.String())
		}
		r.Limits = append(r.Limits, l)
	}
	if len(skipped) > 0 {
		parts = append(parts, "CPU limits not applied ("+strings.Join(skipped, ", ")+")")
	}
	r.Line = strings.Join(parts, "; ")
	return r
}

// Warnings are what the run should carry in its validity warnings: the
// CPU limits drill could not apply, and why (at most one line).
func (p *Placement) Warnings() []string {
	if p == nil || p.created {
		return nil
	}
	var skipped []string
	for s, q := range p.cfg.Limits {
		if q > 0 {
			skipped = append(skipped, s+" ("+q.String()+")")
		}
	}
	if len(skipped) == 0 {
		return nil
	}
	sort.Strings(skipped)
	return []string{fmt.Sprintf("CPU limits not applied to %s: drill may not create cgroups here (%s); those replicas ran without a CPU limit",
		strings.Join(skipped, ", "), p.why)}
}
