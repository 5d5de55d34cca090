package findings

import (
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/plan"
)

// TestEvictionsRefused: the EvictionRefused events of one fault make one
// notice naming the pods; a fault whose evictions all went through makes
// none.
func TestEvictionsRefused(t *testing.T) {
	t.Parallel()
	evs := []event.Event{
		{At: 10 * time.Second, Kind: event.K8sEvent, Reason: "Evicted", Fault: "kill", Service: "api", Pod: "api-x"},
		{At: 10 * time.Second, Kind: event.K8sEvent, Reason: ReasonEvictionRefused, Fault: "kill", Service: "api", Pod: "api-y"},
		{At: 11 * time.Second, Kind: event.K8sEvent, Reason: ReasonEvictionRefused, Fault: "kill", Service: "api", Pod: "api-z"},
	}
	got := Compute(Input{Plan: &plan.Plan{Duration: time.Minute}, Events: evs})
	var found []Finding
	for _, f := range got {
		if f.Kind == KindEviction {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d eviction findings, want 1: %+v", len(found), found)
	}
	f := found[0]
	if f.Severity != Notice || f.Rule != RuleEvictionRefused || f.Fault != "kill" || f.Start != 10*time.Second || f.End != 11*time.Second ||
		!strings.Contains(f.Text, "2 pod(s) of api (api-y, api-z)") || f.Figures[0].Value != 2 {
		t.Errorf("finding %+v", f)
	}
}
