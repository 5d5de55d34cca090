package record

import (
	"testing"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/plan"
)

func TestExpectation(t *testing.T) {
	t.Parallel()
	judgements := func(fail ...string) *plan.Plan {
		p := &plan.Plan{}
		for _, n := range []string{"a", "b", "c"} {
			j := plan.Judgement{Assertion: n}
			for _, f := range fail {
				j.ExpectFail = j.ExpectFail || f == n
			}
			p.Judgements = append(p.Judgements, j)
		}
		return p
	}
	results := func(verdicts ...assert.Verdict) []assert.Result {
		var out []assert.Result
		for i, v := range verdicts {
			out = append(out, assert.Result{Name: []string{"a", "b", "c"}[i], Verdict: v})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		plan    *plan.Plan
		results []assert.Result
		right   bool
		text    string
	}{
		{"correct build passes", judgements(), results(assert.Pass, assert.Pass, assert.Pass), true,
			"as declared: every assertion passes"},
		{"correct build fails one", judgements(), results(assert.Pass, assert.Fail, assert.Pass), false,
			"declared every assertion passes; failed besides: b (fail)"},
		{"naive fails exactly as declared", judgements("a", "c"), results(assert.Fail, assert.Pass, assert.Fail), true,
			"as declared: exactly a, c fail"},
		{"naive fails one declared only", judgements("a", "c"), results(assert.Fail, assert.Pass, assert.Pass), false,
			"declared exactly a, c fail; did not fail: c"},
		{"naive fails another as well", judgements("a"), results(assert.Fail, assert.Fail, assert.Pass), false,
			"declared exactly a fail; failed besides: b (fail)"},
		{"naive on the wrong assertion", judgements("a"), results(assert.Pass, assert.Fail, assert.Pass), false,
			"declared exactly a fail; did not fail: a; failed besides: b (fail)"},
		{"an error is neither", judgements("a"), results(assert.Error, assert.Pass, assert.Error), false,
			"declared exactly a fail; did not fail: a (error); failed besides: c (error)"},
		{"declared but not judged", judgements("c"), results(assert.Pass, assert.Pass), false,
			"declared exactly c fail; did not fail: c (not judged)"},
		{"no plan", nil, results(assert.Pass), true, "as declared: every assertion passes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := (&Run{Plan: tc.plan, Results: tc.results}).Expectation()
			if e.Right() != tc.right || e.String() != tc.text {
				t.Errorf("Expectation: right %v %q, want %v %q", e.Right(), e.String(), tc.right, tc.text)
			}
		})
	}
}
