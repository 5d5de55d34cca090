package record

import (
	"reflect"
	"testing"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/plan"
)

func TestClaims(t *testing.T) {
	run := &Run{
		Plan: &plan.Plan{Judgements: []plan.Judgement{{Assertion: "no-404s", ExpectFail: true}}},
		Results: []assert.Result{
			{Name: "no-404s", Verdict: assert.Fail, Source: `ADR0077-2, ADR0077-6 "no 404 phases"`},
			{Name: "never-unroutable", Verdict: assert.Fail, Source: `ADR0077-1 "a saturated service stays routed"`},
			{Name: "p99", Verdict: assert.Pass, Source: "MC-PS-01.2"},
			{Name: "restarts", Verdict: assert.Error, Source: "MC-PS-01.2, INV-HLT-03"},
			{Name: "untied", Verdict: assert.Fail},
			{Name: "again", Verdict: assert.Pass, Source: "ADR0077-2 (twice: ADR0077-2)"},
		},
	}
	want := []ClaimVerdict{
		{ID: "ADR0077-2", Verdict: assert.Fail, Assertions: []string{"no-404s", "again"}, Expected: true},
		{ID: "ADR0077-6", Verdict: assert.Fail, Assertions: []string{"no-404s"}, Expected: true},
		{ID: "ADR0077-1", Verdict: assert.Fail, Assertions: []string{"never-unroutable"}},
		{ID: "MC-PS-01.2", Verdict: assert.Error, Assertions: []string{"p99", "restarts"}},
		{ID: "INV-HLT-03", Verdict: assert.Error, Assertions: []string{"restarts"}},
	}
	if got := run.Claims(); !reflect.DeepEqual(got, want) {
		t.Errorf("Claims():\n got %+v\nwant %+v", got, want)
	}
	if got := (&Run{Results: []assert.Result{{Name: "a", Verdict: assert.Pass}}}).Claims(); got != nil {
		t.Errorf("no sources: %+v, want nil", got)
	}
}
