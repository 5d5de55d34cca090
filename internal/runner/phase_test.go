package runner

import (
	"testing"
	"time"

	"github.com/drillhq/drill/internal/plan"
)

// TestPhaseAt: progress lines name warm-up, the windows, the gaps between
// them and the end of the timeline.
func TestPhaseAt(t *testing.T) {
	s := time.Second
	p := &plan.Plan{Duration: 75 * s, Warmup: 5 * s, Windows: []plan.Window{
		{Name: "run", Start: 5 * s, End: 75 * s},
		{Name: "baseline", Start: 5 * s, End: 20 * s},
		{Name: "fault:pg-pause", Start: 20 * s, End: 35 * s},
		{Name: "recovery:pg-pause", Start: 35 * s, End: 50 * s},
		{Name: "after-recovery", Start: 65 * s, End: 75 * s},
	}}
	for _, tc := range []struct {
		at   time.Duration
		want string
	}{
		{0, "warmup"}, {4999 * time.Millisecond, "warmup"}, {5 * s, "baseline"}, {20 * s, "fault:pg-pause"},
		{49 * s, "recovery:pg-pause"}, {55 * s, "run"}, {70 * s, "after-recovery"}, {75 * s, "end"}, {80 * s, "end"},
	} {
		if got := phaseAt(p, tc.at); got != tc.want {
			t.Errorf("phaseAt(%s) = %q, want %q", tc.at, got, tc.want)
		}
	}
}
