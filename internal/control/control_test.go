package control

import "testing"

func TestLivePhase(t *testing.T) {
	for _, c := range []struct {
		name, planned string
		faults        []FaultLive
		want          string
	}{
		{"on schedule", "fault:a", []FaultLive{{Name: "a", State: FaultOnState, OnAt: 2}}, "fault:a"},
		{"ended early", "fault:a", []FaultLive{{Name: "a", State: FaultEnded, OnAt: 2, OffAt: 3}}, "recovery:a"},
		{"held past its end", "recovery:a", []FaultLive{{Name: "a", State: FaultHeld, OnAt: 2}}, "fault:a"},
		{"manual not started", "fault:m", []FaultLive{{Name: "m", State: FaultWaiting, OnAt: -1}}, "run"},
		{"manual started", "baseline", []FaultLive{{Name: "m", State: FaultOnState, OnAt: 5}}, "fault:m"},
		{"never started, run over", "fault:m", []FaultLive{{Name: "m", State: FaultEnded, OnAt: -1}}, "run"},
		{"warmup", "warmup", []FaultLive{{Name: "a", State: FaultPending, OnAt: -1}}, "warmup"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := livePhase(c.planned, c.faults); got != c.want {
				t.Errorf("livePhase(%q) = %q, want %q", c.planned, got, c.want)
			}
		})
	}
}
