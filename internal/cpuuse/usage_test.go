package cpuuse

import (
	"testing"
	"time"
)

// sampleUsage is a saturated 2-core run of 60 s: drill 52%, three
// order-gateway replicas 40%, postgres 6%; t=35 s was the busiest.
func sampleUsage() *Usage {
	u := &Usage{
		Cores: 2, From: 0, To: 60 * time.Second, CapacitySeconds: 120, BusySeconds: 118.8, Busy: 0.99,
		Parts: []PartUsage{
			{Name: "drill", Kind: KindDrill, Seconds: 62.4, Share: 0.52},
			{Name: "order-gateway replicas", Kind: KindService, Seconds: 48, Share: 0.40, Processes: 3},
			{Name: "postgres", Kind: KindDependency, Seconds: 7.2, Share: 0.06, Processes: 1},
		},
	}
	for i := range 60 {
		s := Second{At: time.Duration(i) * time.Second, Busy: 0.98, Parts: []float64{0.5, 0.42, 0.06}}
		if i == 35 {
			s = Second{At: 35 * time.Second, Busy: 1, Parts: []float64{0.61, 0.38, 0.01}}
		}
		u.Seconds = append(u.Seconds, s)
	}
	return u
}

func TestLine(t *testing.T) {
	quiet := sampleUsage()
	quiet.Busy = 0.62
	quiet.Parts[0].Share, quiet.Parts[1].Share, quiet.Parts[2].Share = 0.30, 0.28, 0.003
	one := &Usage{Cores: 1, To: 10 * time.Second, Busy: 0.2, Parts: []PartUsage{{Name: "drill", Share: 0.2}}}
	tests := []struct {
		name string
		u    *Usage
		want string
	}{
		{"saturated", sampleUsage(), "2 cores saturated (99% busy) over 60.0 s: drill 52%, order-gateway replicas 40%, postgres 6%, other 1%"},
		{"not saturated, a part under 1%", quiet, "2 cores 62% busy over 60.0 s: drill 30%, order-gateway replicas 28%, postgres <1%, other 4%"},
		{"one core, nothing else", one, "1 core 20% busy over 10.0 s: drill 20%, other 0%"},
		{"not measured", nil, "not measured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.u.Line(); got != tt.want {
				t.Errorf("Line() =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	quiet := sampleUsage()
	quiet.Busy = 0.55
	quiet.Parts[1].Share = 0.05
	for i := range quiet.Seconds {
		quiet.Seconds[i].Busy = 0.5
	}
	waited := sampleUsage()
	w := 14.2
	waited.DrillWaitSeconds = &w
	for i := range waited.Seconds {
		waited.Seconds[i].DrillWait = 0.005
	}
	waited.Seconds[35].DrillWait = 0.38
	// PostgreSQL used 40% of the machine (78% in its busiest second), the
	// service's replicas 12%: the advice names postgres first.
	busyPG := sampleUsage()
	busyPG.Parts[0].Share, busyPG.Parts[1].Share, busyPG.Parts[2].Share = 0.46, 0.12, 0.40
	for i := range busyPG.Seconds {
		busyPG.Seconds[i].Parts = []float64{0.46, 0.12, 0.40}
	}
	busyPG.Seconds[25].Parts = []float64{0.16, 0.06, 0.78}
	busyOther := sampleUsage()
	busyOther.Parts[0].Share, busyOther.Parts[1].Share = 0.40, 0.30 // other 23%
	tests := []struct {
		name   string
		u      *Usage
		lateAt time.Duration
		want   string
	}{
		{"saturated, late second known", sampleUsage(), 35 * time.Second,
			"the machine over the run: 2 cores saturated (99% busy) over 60.0 s: drill 52%, order-gateway replicas 40%, postgres 6%, other 1%; " +
				"in t=35.0-36.0 s, where most late requests were due: 2 cores saturated (100% busy): drill 61%, order-gateway replicas 38%, postgres 1%, other 0%; " +
				"to try: fewer replicas of order-gateway (3 now) or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used 40%, " +
				"a machine with more cores, a longer lagBudget only if the machine is known to be slow"},
		{"saturated, late second elsewhere", sampleUsage(), 10 * time.Second,
			"the machine over the run: 2 cores saturated (99% busy) over 60.0 s: drill 52%, order-gateway replicas 40%, postgres 6%, other 1%; " +
				"in t=10.0-11.0 s, where most late requests were due: 2 cores saturated (98% busy): drill 50%, order-gateway replicas 42%, postgres 6%, other 0%; " +
				"busiest second t=35.0-36.0 s: 2 cores saturated (100% busy): drill 61%, order-gateway replicas 38%, postgres 1%, other 0%; " +
				"to try: fewer replicas of order-gateway (3 now) or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used 40%, " +
				"a machine with more cores, a longer lagBudget only if the machine is known to be slow"},
		{"other work on the machine", busyOther, -1,
			"the machine over the run: 2 cores saturated (99% busy) over 60.0 s: drill 40%, order-gateway replicas 30%, postgres 6%, other 23%; " +
				"busiest second t=35.0-36.0 s: 2 cores saturated (100% busy): drill 61%, order-gateway replicas 38%, postgres 1%, other 0%; " +
				"to try: fewer replicas of order-gateway (3 now) or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used 30% (42% in t=0.0-1.0 s), " +
				"other work used 23% of the machine: run on a quiet machine, a machine with more cores, a longer lagBudget only if the machine is known to be slow"},
		{"a dependency was the busiest part", busyPG, -1,
			"the machine over the run: 2 cores saturated (99% busy) over 60.0 s: drill 46%, order-gateway replicas 12%, postgres 40%, other 1%; " +
				"busiest second t=35.0-36.0 s: 2 cores saturated (100% busy): drill 46%, order-gateway replicas 12%, postgres 40%, other 2%; " +
				"to try: less work for postgres (a lower rate on the streams whose requests reach it, or fewer replicas querying it): it used 40% (78% in t=25.0-26.0 s), " +
				"fewer replicas of order-gateway (3 now) or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used 12%, " +
				"a machine with more cores, a longer lagBudget only if the machine is known to be slow"},
		{"not saturated", quiet, -1,
			"the machine over the run: 2 cores 55% busy over 60.0 s: drill 52%, order-gateway replicas 5%, postgres 6%, other 0%; " +
				"to try: the machine was not saturated (55% busy), so look at the busiest seconds and at the stream's worker cap, a longer lagBudget only if the machine is known to be slow"},
		{"drill waited for a CPU where it fell behind", waited, 35 * time.Second,
			"the machine over the run: 2 cores saturated (99% busy) over 60.0 s: drill 52%, order-gateway replicas 40%, postgres 6%, other 1%; drill's threads waited 14.2 s for a CPU in all; " +
				"in t=35.0-36.0 s, where most late requests were due: 2 cores saturated (100% busy): drill 61%, order-gateway replicas 38%, postgres 1%, other 0%, drill's threads waited 380 ms for a CPU; " +
				"to try: fewer replicas of order-gateway (3 now) or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used 40%, " +
				"a machine with more cores, a longer lagBudget only if the machine is known to be slow"},
		{"drill hardly waited where it fell behind", waited, 10 * time.Second,
			"the machine over the run: 2 cores saturated (99% busy) over 60.0 s: drill 52%, order-gateway replicas 40%, postgres 6%, other 1%; drill's threads waited 14.2 s for a CPU in all; " +
				"in t=10.0-11.0 s, where most late requests were due: 2 cores saturated (98% busy): drill 50%, order-gateway replicas 42%, postgres 6%, other 0%, drill's threads waited 5 ms for a CPU; " +
				"drill hardly waited for a CPU there, so it fell behind on its own work, not for want of a core: `drill run --cpuprofile FILE` shows which part (go tool pprof -tags FILE); " +
				"busiest second t=35.0-36.0 s: 2 cores saturated (100% busy): drill 61%, order-gateway replicas 38%, postgres 1%, other 0%, drill's threads waited 380 ms for a CPU; " +
				"to try: fewer replicas of order-gateway (3 now) or fewer Go threads for it (args [--gomaxprocs, \"1\"] for a reference service, env GOMAXPROCS=1 for another Go service): its replicas used 40%, " +
				"a machine with more cores, a longer lagBudget only if the machine is known to be slow"},
		{"not measured", nil, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.u.Explain(tt.lateAt); got != tt.want {
				t.Errorf("Explain() =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

// TestMachineSpan covers the capacity and busy time between two samples:
// the capacity is cores x the wall span, busy its complement of idle,
// bounded below by the parts' own CPU and above by the capacity.
func TestMachineSpan(t *testing.T) {
	at := func(d time.Duration, busy, idle uint64) sample {
		return sample{at: d, machine: machineStat{cores: 2, busy: busy, idle: idle}}
	}
	tests := []struct {
		name              string
		a, b              sample
		parts             uint64
		wantTotal, wantBz uint64
	}{
		// 10 s on 2 cores is 2,000 ticks; /proc/stat counted 1,840 of
		// them (160 busy ticks lost) and 1,200 idle: busy is 800, not 640.
		{"busy ticks lost", at(0, 1000, 5000), at(10*time.Second, 1640, 6200), 700, 2000, 800},
		{"exact ticks", at(0, 0, 0), at(10*time.Second, 800, 1200), 700, 2000, 800},
		// The parts' exact CPU is a floor for the machine's busy time.
		{"parts above the complement", at(0, 0, 0), at(10*time.Second, 500, 1600), 450, 2000, 450},
		// Idle counted past the span (reads a little apart): busy is the
		// parts' CPU, the capacity stays the wall's.
		{"idle past the span", at(0, 0, 0), at(time.Second, 0, 210), 20, 200, 20},
		// Parts above the capacity (a sample's jitter): busy is the capacity.
		{"parts above the capacity", at(0, 0, 0), at(time.Second, 150, 50), 230, 200, 200},
		// No wall span: /proc/stat's own counts.
		{"no span", at(time.Second, 0, 0), at(time.Second, 300, 700), 100, 1000, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total, busy := machineSpan(tt.a, tt.b, tt.parts)
			if total != tt.wantTotal || busy != tt.wantBz {
				t.Errorf("machineSpan = total %d, busy %d; want %d, %d", total, busy, tt.wantTotal, tt.wantBz)
			}
		})
	}
}
