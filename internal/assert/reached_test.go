package assert

import (
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

// TestReached: a lane that filled to its quota at least once in the window
// passes; one that never did fails with its closest sample; no sample is
// an error.
func TestReached(t *testing.T) {
	// tax lane: 3 active, 15 from t=20 s to t=35 s.
	tax := map[int]float64{}
	for s := 20; s < 35; s++ {
		tax[s] = 15
	}
	tax[19] = 9
	evs := append(faultEvents(), workers("tax_calc", tax, 0, 60, 3)...)
	reached := scenario.Assertion{Type: scenario.AssertReached, Window: "fault:db-pause", Metric: "bulkhead_active_workers",
		Labels: map[string]string{"lane": "tax_calc"}, Op: "==", Value: f64(15)}
	baseline := reached
	baseline.Window = "baseline"
	atLeast := baseline
	atLeast.Op, atLeast.Value = ">=", f64(10)
	for _, c := range []judgeCase{
		{name: "lane filled in the fault", events: evs, a: reached, verdict: Pass, figure: "15 (first, at t=20.300s)",
			extra:    []string{"samples=15 samples", "reaching=15 samples"},
			contains: []string{`15 of 15 samples of bulkhead_active_workers{lane="tax_calc"} in fault:db-pause reached the level`}},
		{name: "never reached in the baseline, closest reported", events: evs, a: atLeast, verdict: Fail, figure: "9 (closest, at t=19.300s)",
			evidence: []string{`closest sample bulkhead_active_workers{instance="pc-0",lane="tax_calc"} = 9`}},
		{name: "== never met", events: evs, a: baseline, verdict: Fail, figure: "9 (closest, at t=19.300s)"},
		{name: "no samples is an error", events: evs, verdict: Error,
			a:        func() scenario.Assertion { m := reached; m.Labels = map[string]string{"lane": "fraud_eval"}; return m }(),
			contains: []string{`no samples of bulkhead_active_workers{lane="fraud_eval"} in fault:db-pause`}},
	} {
		t.Run(c.name, c.run)
	}
}
