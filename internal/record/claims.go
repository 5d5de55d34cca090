package record

import (
	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/scenario"
)

// ClaimVerdict is the verdict of one claim of the source documents (an id
// of docs/CLAIMS.md: MC-PS-01.2, INV-BH-02, ADR0077-4) in one run: the
// claim is checked by the assertions whose source names it.
type ClaimVerdict struct {
	// ID is the claim's id as the assertions' source names it.
	ID string `json:"id"`
	// Verdict is fail when any of its assertions failed, else the first
	// verdict that is not pass (error, aborted), else pass.
	Verdict assert.Verdict `json:"verdict"`
	// Assertions name the assertions that check it, in scenario order.
	Assertions []string `json:"assertions"`
	// Expected is true when the claim failed only on assertions the
	// scenario's expect.fail declared: a naive twin failing where it
	// must.
	Expected bool `json:"expected,omitempty"`
}

// Claims returns the claims r's assertions checked, in order of first
// appearance in r.Results, each with its verdict (docs/CLAIMS.md names
// them). A run whose assertions name no claim returns nil.
func (r *Run) Claims() []ClaimVerdict {
	declared := map[string]bool{}
	if r.Plan != nil {
		for _, n := range r.Plan.ExpectedFailures() {
			declared[n] = true
		}
	}
	var out []ClaimVerdict
	index := map[string]int{}
	for _, res := range r.Results {
		for _, id := range scenario.ClaimIDs(res.Source) {
			i, ok := index[id]
			if !ok {
				i = len(out)
				index[id] = i
				out = append(out, ClaimVerdict{ID: id, Verdict: assert.Pass, Expected: true})
			}
			c := &out[i]
			c.Assertions = append(c.Assertions, res.Name)
			switch {
			case res.Verdict == assert.Fail:
				if c.Verdict != assert.Fail {
					c.Verdict = assert.Fail
				}
				c.Expected = c.Expected && declared[res.Name]
			case res.Verdict != assert.Pass && c.Verdict == assert.Pass:
				c.Verdict = res.Verdict
			}
		}
	}
	for i := range out {
		if out[i].Verdict != assert.Fail {
			out[i].Expected = false
		}
	}
	return out
}
