package assert

import (
	"slices"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

// TestTypesMatchScenarioAssertionTypes pins the two registries of
// assertion kinds to each other: a kind the scenario format accepts has a
// judge, and a judge has a kind the format accepts (with its spec, docs
// and example; see scenario's TestAssertionKindsDocumented).
func TestTypesMatchScenarioAssertionTypes(t *testing.T) {
	var got []string
	for _, k := range Types() {
		got = append(got, string(k))
	}
	want := scenario.AssertionTypes
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("assertion kind %q is in scenario.AssertionTypes but has no judge: add one to the registry in internal/assert (see CONTRIBUTING.md)", k)
		}
	}
	for _, k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("judge %q has no assertion kind in scenario.AssertionTypes: add its AssertionSpec to the scenario registry (see CONTRIBUTING.md)", k)
		}
	}
}
