package record

import (
	"fmt"
	"strings"

	"github.com/drillhq/drill/internal/assert"
)

// Expectation compares a run's assertion verdicts with what its scenario
// declared in expect.fail (recorded in the plan's judgements,
// plan.Judgement.ExpectFail): a naive twin gives the right verdict only
// when exactly the declared assertions fail and every other passes.
type Expectation struct {
	// Declared names the assertions expect.fail declared, in scenario
	// order; empty when every assertion must pass.
	Declared []string
	// Failed names the assertions whose verdict is fail, in scenario
	// order.
	Failed []string
	// Missing names declared assertions whose verdict is not fail (with
	// the verdict when it is not pass: "auth-p99 (error)").
	Missing []string
	// Unexpected names undeclared assertions whose verdict is not pass,
	// with the verdict ("no-restarts (fail)").
	Unexpected []string
}

// Expectation reads the declaration from r.Plan and the verdicts from
// r.Results. A run without a plan declares nothing.
func (r *Run) Expectation() Expectation {
	var e Expectation
	declared := map[string]bool{}
	if r.Plan != nil {
		e.Declared = r.Plan.ExpectedFailures()
		for _, n := range e.Declared {
			declared[n] = true
		}
	}
	judged := map[string]bool{}
	for _, res := range r.Results {
		judged[res.Name] = true
		if res.Verdict == assert.Fail {
			e.Failed = append(e.Failed, res.Name)
		}
		switch {
		case declared[res.Name] && res.Verdict == assert.Pass:
			e.Missing = append(e.Missing, res.Name)
		case declared[res.Name] && res.Verdict != assert.Fail:
			e.Missing = append(e.Missing, fmt.Sprintf("%s (%s)", res.Name, res.Verdict))
		case !declared[res.Name] && res.Verdict != assert.Pass:
			e.Unexpected = append(e.Unexpected, fmt.Sprintf("%s (%s)", res.Name, res.Verdict))
		}
	}
	for _, n := range e.Declared {
		if !judged[n] {
			e.Missing = append(e.Missing, n+" (not judged)")
		}
	}
	return e
}

// Right reports whether exactly the declared assertions failed and every
// other passed.
func (e Expectation) Right() bool { return len(e.Missing) == 0 && len(e.Unexpected) == 0 }

// String says in one line how the verdicts differ from the declaration,
// or that they match.
func (e Expectation) String() string {
	want := "every assertion passes"
	if len(e.Declared) > 0 {
		want = "exactly " + strings.Join(e.Declared, ", ") + " fail"
	}
	if e.Right() {
		return "as declared: " + want
	}
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "did not fail: "+strings.Join(e.Missing, ", "))
	}
	if len(e.Unexpected) > 0 {
		parts = append(parts, "failed besides: "+strings.Join(e.Unexpected, ", "))
	}
	return "declared " + want + "; " + strings.Join(parts, "; ")
}
