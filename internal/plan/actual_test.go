package plan

import (
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
)

func TestFollowActual(t *testing.T) {
	s := time.Second
	base := func() *Plan {
		return &Plan{Duration: 60 * s, Warmup: 5 * s,
			Actions: []Action{{At: 20 * s, Kind: FaultOn, Target: "a", Detail: "latency"}, {At: 30 * s, Kind: FaultOff, Target: "a"}, {At: 60 * s, Kind: RunEnd}},
			Windows: []Window{{Name: "run", Start: 5 * s, End: 60 * s}, {Name: "baseline", Start: 5 * s, End: 20 * s},
				{Name: "fault:a", Start: 20 * s, End: 30 * s, Fault: "a"}, {Name: "recovery:a", Start: 30 * s, End: 40 * s, Fault: "a"},
				{Name: "fault:m", Start: 5 * s, End: 60 * s, Fault: "m"}}}
	}
	for _, c := range []struct {
		name   string
		follow map[string]bool
		events []event.Event
		want   map[string][2]time.Duration
	}{
		{"none followed", nil, []event.Event{{At: 21 * s, Kind: event.FaultOn, Fault: "a"}},
			map[string][2]time.Duration{"fault:a": {20 * s, 30 * s}, "baseline": {5 * s, 20 * s}}},
		{"ended early", map[string]bool{"a": true}, []event.Event{{At: 20 * s, Kind: event.FaultOn, Fault: "a"}, {At: 24 * s, Kind: event.FaultOff, Fault: "a"}},
			map[string][2]time.Duration{"fault:a": {20 * s, 24 * s}, "recovery:a": {24 * s, 34 * s}}},
		{"manual started late, never ended", map[string]bool{"m": true}, []event.Event{{At: 50 * s, Kind: event.FaultOn, Fault: "m"}},
			map[string][2]time.Duration{"fault:m": {50 * s, 60 * s}, "baseline": {5 * s, 50 * s}}},
		{"manual never started", map[string]bool{"m": true}, nil,
			map[string][2]time.Duration{"fault:m": {60 * s, 60 * s}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			p.FollowActual(c.follow, c.events, 10*s)
			for name, want := range c.want {
				w, ok := p.Window(name)
				if !ok || w.Start != want[0] || w.End != want[1] {
					t.Errorf("%s = [%s, %s) (%v), want [%s, %s)", name, w.Start, w.End, ok, want[0], want[1])
				}
			}
			for i := 1; i < len(p.Actions); i++ {
				if p.Actions[i].At < p.Actions[i-1].At {
					t.Errorf("actions out of order: %+v", p.Actions)
				}
			}
		})
	}
}
