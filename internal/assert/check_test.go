package assert

import (
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// checkSeries is 60 s of the tax stream, 100 requests a second; the check
// retry-after-5 applies to 0 responses a second before the fault
// (baseline), to `applied` a second during it (20..35 s), of which
// failedAt lists, per second offset, how many fail (the first with an
// example).
func checkSeries(applied int64, failedAt map[int]int64) map[string]*measure.Series {
	s := mkSeries("tax", steady(60, bucketSpec{n: 100, lat: 2 * ms1}))
	for i, b := range s.Buckets {
		if i < 20 || i >= 35 {
			continue
		}
		c := measure.CheckCount{Applied: applied, Failed: failedAt[i]}
		for j := int64(0); j < failedAt[i]; j++ {
			c.AddExample(measure.CheckFailure{At: b.Start + time.Duration(j)*time.Millisecond, Status: 503, Reason: `Retry-After "7" != "5"`})
		}
		b.Checks = map[string]measure.CheckCount{"retry-after-5": c}
	}
	return map[string]*measure.Series{"tax": s}
}

func TestCheck(t *testing.T) {
	a := scenario.Assertion{Type: scenario.AssertCheck, Stream: "tax", Check: "retry-after-5", Window: "fault:db-pause", MaxRate: f64(0)}
	loose := a
	loose.MaxRate = f64(0.01)
	// 15 s x 72 = 1,080 applied; 5 failures at 23 s, 2 at 30 s.
	some := checkSeries(72, map[int]int64{23: 5, 30: 2})
	for _, c := range []judgeCase{
		{name: "none failed", series: checkSeries(72, nil), a: a, verdict: Pass, figure: "0 of 1,080 failed (0%)", value: f64(0),
			contains: []string{"check retry-after-5 of tax: 0 of 1,080 responses failed in fault:db-pause (0%); bound <= 0% failed"},
			extra:    []string{"applied=1080 responses", "failed=0 responses"}},
		{name: "some failed, maxRate 0", series: some, a: a, verdict: Fail, figure: "7 of 1,080 failed (0.65%)",
			contains: []string{"7 of 1,080 responses failed", `first: 503 at t=23.000s: Retry-After "7" != "5"`},
			evidence: []string{`503 at t=23.000s: Retry-After "7" != "5"`, "503 at t=23.004s"}},
		{name: "some failed, within maxRate", series: some, a: loose, verdict: Pass, figure: "7 of 1,080 failed (0.65%)",
			contains: []string{"bound <= 1.00% failed"}},
		{name: "never applied fails", series: checkSeries(72, nil), a: func() scenario.Assertion { b := a; b.Window = "baseline"; return b }(),
			verdict: Fail, figure: "no response checked",
			contains: []string{"applied to no response in baseline (1500 requests completed there)", "never came"}},
		{name: "unknown check never applied", series: checkSeries(72, nil), a: func() scenario.Assertion { b := a; b.Check = "other"; return b }(),
			verdict: Fail, figure: "no response checked"},
		{name: "no check named", series: some, a: func() scenario.Assertion { b := a; b.Check = ""; return b }(),
			verdict: Error, contains: []string{"needs check"}},
		{name: "unmeasured stream", series: some, a: func() scenario.Assertion { b := a; b.Stream = "orders"; return b }(),
			verdict: Error, contains: []string{`no measurements for stream "orders"`}},
	} {
		t.Run(c.name, c.run)
	}
	// Only the earliest examples of the window are evidence.
	r := Judge(testPlan(), []scenario.Assertion{a}, nil, some)[0]
	if len(r.Evidence) != measure.MaxCheckExamples || r.Evidence[0].At != 23*time.Second {
		t.Errorf("evidence = %+v, want the first %d failures from t=23s", r.Evidence, measure.MaxCheckExamples)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1075: "1,075", 1234567: "1,234,567", -1075: "-1,075"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
