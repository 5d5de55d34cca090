package inject

import (
	"slices"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

// TestKindsMatchScenarioFaultTypes pins the two registries of fault kinds
// to each other: a kind the scenario format accepts has an injector, and
// an injector has a kind the format accepts (with its spec, docs and
// example; see scenario's TestFaultKindsDocumented).
func TestKindsMatchScenarioFaultTypes(t *testing.T) {
	got, want := Kinds(), scenario.FaultTypes
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("fault kind %q is in scenario.FaultTypes but has no injector: register one in internal/inject (see CONTRIBUTING.md)", k)
		}
	}
	for _, k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("injector %q has no fault kind in scenario.FaultTypes: add its FaultSpec to the scenario registry (see CONTRIBUTING.md)", k)
		}
	}
}
