package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./internal/compare -update to accept):\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// saved returns run as drill writes and reads it (digest included).
func saved(t *testing.T, run *record.Run) *record.Run {
	t.Helper()
	b, err := record.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	r, err := record.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func render(t *testing.T, rep *Report) (text, js []byte) {
	t.Helper()
	var tb, jb bytes.Buffer
	if err := WriteText(&tb, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&jb, rep); err != nil {
		t.Fatal(err)
	}
	return tb.Bytes(), jb.Bytes()
}

// TestGoldenSameRun: a run compared with itself has every delta zero and
// no regression (exit 0); text and JSON are pinned.
func TestGoldenSameRun(t *testing.T) {
	t.Parallel()
	base := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	rep, err := Runs(base, base, Options{Rules: DefaultRules(), BasePath: "base/run.json", NewPath: "new/run.json"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() || rep.ExitCode() != exitcode.OK {
		t.Fatalf("a run against itself regressed: %v", rep.Regressions)
	}
	text, js := render(t, rep)
	golden(t, "same.txt", text)
	golden(t, "same.json", js)
}

// TestGoldenTighterBound: the same run re-judged with a tighter latency
// bound (as drill report --set does) compares as a regression naming the
// assertion, with every stream and finding figure unchanged.
func TestGoldenTighterBound(t *testing.T) {
	t.Parallel()
	base := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	tight := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	if err := scenario.OverrideAssertion(tight.Scenario.Assertions, "auth-p99-during-brownout.maxLatency=10ms"); err != nil {
		t.Fatal(err)
	}
	tight.Rejudge()
	rep, err := Runs(base, tight, Options{Rules: DefaultRules()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Regressions) != 1 || !strings.HasPrefix(rep.Regressions[0], "assertion auth-p99-during-brownout: passed in the baseline") {
		t.Fatalf("regressions %q, want exactly the tightened assertion", rep.Regressions)
	}
	text, js := render(t, rep)
	golden(t, "tighter.txt", text)
	golden(t, "tighter.json", js)
}

// TestGoldenNaiveForced: the naive build is another scenario (digest),
// refused without --force; forced, its slower p99, errors, restart and
// failed assertions are regressions.
func TestGoldenNaiveForced(t *testing.T) {
	t.Parallel()
	base := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	naive := saved(t, recordtest.Run(recordtest.Options{Scale: 10, Naive: true}))
	if _, err := Runs(base, naive, Options{Rules: DefaultRules()}); !errors.Is(err, ErrDifferentScenario) {
		t.Fatalf("error %v, want ErrDifferentScenario", err)
	}
	rep, err := Runs(base, naive, Options{Rules: DefaultRules(), Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Forced || rep.ExitCode() != exitcode.AssertionFailed {
		t.Fatalf("forced=%v exit=%d", rep.Forced, rep.ExitCode())
	}
	var rules []string
	rules = append(rules, rep.Regressions...)
	for _, want := range []string{"stream card-auth fault:tax-brownout ok-p99", "stream card-auth fault:tax-brownout error-rate", "restarts payment-core restarts", "assertion auth-p99-during-brownout"} {
		if !strings.Contains(strings.Join(rules, "\n"), want) {
			t.Errorf("regressions lack %q:\n%s", want, strings.Join(rules, "\n"))
		}
	}
	text, js := render(t, rep)
	golden(t, "naive-forced.txt", text)
	golden(t, "naive-forced.json", js)
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || len(back.Regressions) != len(rep.Regressions) {
		t.Fatalf("JSON does not read back: %v", err)
	}
}

// TestGoldenFastFailuresAreNotFaster: a baseline whose card-auth requests
// mostly failed fast during the fault (100 of each second's 140 answered
// 503 in 1 ms) has a lower p99 over every request than a run in which all
// of them succeeded, with the same slow tail of successes. Over every
// request the second run would read as a p99 regression; compared on the
// successful requests it is none, and the error rate beside it fell from
// 71 % to 0.
func TestGoldenFastFailuresAreNotFaster(t *testing.T) {
	t.Parallel()
	// During the fault 2 of each second's 140 card-auth requests would take
	// 45 ms, the rest 8-28 ms; failFast answers 100 of them (one of the
	// slow two among them) 503 in 1 ms.
	during := func(failFast bool) *record.Run {
		run := recordtest.Run(recordtest.Options{Scale: 10})
		for i, b := range run.Series["card-auth"].Buckets {
			if b.Start < recordtest.FaultOn || b.Start >= recordtest.FaultOff {
				continue
			}
			nb := measure.NewBucket(b.Start, b.Width)
			nb.Intended = b.Intended
			for k := range int(b.Requests) {
				nb.Requests++
				measure.Record(nb.Lag, 100*time.Microsecond)
				if failFast && (k/10)%10 < 6 {
					nb.Codes[503]++
					measure.Record(nb.Latency, time.Millisecond)
					measure.Record(nb.Shed, time.Millisecond)
					continue
				}
				lat := 8*time.Millisecond + time.Duration(k%100)*200*time.Microsecond
				if k%50 == 49 {
					lat = 45 * time.Millisecond
				}
				nb.Codes[200]++
				nb.OK++
				measure.Record(nb.Latency, lat)
				measure.Record(nb.Success, lat)
			}
			run.Series["card-auth"].Buckets[i] = nb
		}
		run.Rejudge()
		return saved(t, run)
	}
	naive, hardened := during(true), during(false)

	win, _ := hardened.Plan.Window("fault:tax-brownout")
	allBase := assert.Stats(naive.Series["card-auth"].Window(win.Start, win.End))
	allNew := assert.Stats(hardened.Series["card-auth"].Window(win.Start, win.End))
	if allNew.P99 < allBase.P99+5*time.Millisecond || float64(allNew.P99) < 1.2*float64(allBase.P99) {
		t.Fatalf("p99 over every request %s -> %s: the case needs the hardened run to look slower", allBase.P99, allNew.P99)
	}
	rep, err := Runs(naive, hardened, Options{Rules: DefaultRules(), BasePath: "naive/run.json", NewPath: "hardened/run.json"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Streams {
		if r.Judgement == Regression {
			t.Errorf("stream %s %s %s judged a regression: %s", r.Subject, r.Window, r.Figure, r.Why)
		}
	}
	text, _ := render(t, rep)
	golden(t, "fast-failures.txt", text)
}

// TestGoldenRealRuns: two recorded CI-size runs of the short orders
// drill (testdata/runs) compare without regression; their findings'
// unroutable, detection and recovery figures and restarts are compared.
func TestGoldenRealRuns(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "testdata", "runs", "orders-db-brownout-short")
	base, err := record.Load(filepath.Join(dir, "night-1", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	nr, err := record.Load(filepath.Join(dir, "night-2", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Runs(base, nr, Options{Rules: DefaultRules()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() {
		t.Fatalf("regressions: %v", rep.Regressions)
	}
	var subjects []string
	for _, f := range rep.Findings {
		subjects = append(subjects, f.Subject+" "+f.Figure)
	}
	for _, want := range []string{"unroutable order-gateway in pg-pause length", "detection order-gateway in pg-pause detection-first",
		"recovery orders after pg-pause recovery", "restarts order-gateway restarts"} {
		if !strings.Contains(strings.Join(subjects, "\n"), want) {
			t.Errorf("findings rows lack %q:\n%s", want, strings.Join(subjects, "\n"))
		}
	}
	text, _ := render(t, rep)
	golden(t, "orders-real.txt", text)
}

// TestInvalidRunsAreNotComparable: either side invalid gives exit 4,
// naming the side.
func TestInvalidRunsAreNotComparable(t *testing.T) {
	t.Parallel()
	good := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	bad := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	bad.Validity.Problems = []string{"synthetic problem"}
	for _, tc := range []struct {
		name      string
		base, new *record.Run
		which     string
	}{{"base invalid", bad, good, "base"}, {"new invalid", good, bad, "new"}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Runs(tc.base, tc.new, Options{Rules: DefaultRules(), BasePath: "b.json", NewPath: "n.json"})
			var nc *NotComparableError
			if !errors.As(err, &nc) || nc.Which != tc.which || exitcode.Code(err) != exitcode.InvalidMeasurement {
				t.Fatalf("error %v (exit %d), want not comparable on %s with exit 4", err, exitcode.Code(err), tc.which)
			}
			if !strings.Contains(err.Error(), "synthetic problem") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}

// TestOlderRunsCompareByName: records without a digest are the same
// scenario when their names match.
func TestOlderRunsCompareByName(t *testing.T) {
	t.Parallel()
	a := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	b := saved(t, recordtest.Run(recordtest.Options{Scale: 10, Naive: true}))
	a.ScenarioDigest, b.ScenarioDigest = "", ""
	if err := SameScenario(a, b); err != nil {
		t.Fatalf("same name without digests: %v", err)
	}
	b.Scenario.Metadata.Name = "other"
	if err := SameScenario(a, b); !errors.Is(err, ErrDifferentScenario) {
		t.Fatalf("other name: %v", err)
	}
}

func val(v float64, text string) *Value { return &Value{Value: v, Text: text} }

// TestRules: each default rule and its margins, and overrides from a
// scenario's compare section.
func TestRules(t *testing.T) {
	t.Parallel()
	def := DefaultRules()
	f := func(v float64) *float64 { return &v }
	loose := def.With(&scenario.Compare{P99Increase: f(1), P99Slack: &scenario.Duration{Duration: 50 * time.Millisecond},
		ErrorRateIncrease: f(0.05), RecoveryIncrease: f(1), RecoverySlack: &scenario.Duration{Duration: 10 * time.Second},
		NewRestarts: new(bool), PassToFail: new(bool)})
	for _, tc := range []struct {
		name      string
		rules     Rules
		figure    string
		unit      string
		base, new float64
		want      string
	}{
		{"p99 +25% and +10ms", def, FigureOKP99, "ms", 40, 50, Regression},
		{"p99 +25% but only +2.5ms", def, FigureOKP99, "ms", 10, 12.5, OK},
		{"p99 +10ms but only +10%", def, FigureOKP99, "ms", 100, 110, OK},
		{"p99 better", def, FigureOKP99, "ms", 100, 50, OK},
		{"p99 +100% +40ms within loose rules", loose, FigureOKP99, "ms", 40, 80, OK},
		{"p99 tripled beyond loose rules", loose, FigureOKP99, "ms", 40, 120, Regression},
		{"error rate +0.6 pts", def, "error-rate", "ratio", 0.001, 0.007, Regression},
		{"error rate +0.5 pts exactly", def, "error-rate", "ratio", 0.001, 0.006, OK},
		{"error rate +1 pt within loose rules", loose, "error-rate", "ratio", 0, 0.01, OK},
		{"p50 is never judged", def, FigureOKP50, "ms", 10, 1000, NotJudged},
		{"shed rate is never judged", def, "shed-rate", "ratio", 0, 1, NotJudged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := Row{Figure: tc.figure, Unit: tc.unit, Base: val(tc.base, "b"), New: val(tc.new, "n")}
			setDelta(&row)
			judgeStream(&row, tc.rules)
			if row.Judgement != tc.want {
				t.Fatalf("judgement %q (%s), want %q", row.Judgement, row.Why, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name      string
		rules     Rules
		unit      string
		base, new float64
		want      string
	}{
		{"recovery 4 s -> 5.5 s", def, "s", 4, 5.5, Regression},
		{"recovery 2 s -> 2.9 s: +45% but under 1 s", def, "s", 2, 2.9, OK},
		{"recovery 10 s -> 12 s: +2 s but 20%", def, "s", 10, 12, OK},
		{"recovery 4 s -> not recovered", def, "s", 4, -1, Regression},
		{"not recovered -> 4 s", def, "s", -1, 4, OK},
		{"never both", def, "s", -1, -1, OK},
		{"recovery 4 s -> 7 s within loose rules", loose, "s", 4, 7, OK},
		{"new restart", def, "count", 0, 1, Regression},
		{"fewer restarts", def, "count", 2, 1, OK},
		{"new restart with newRestarts off", loose, "count", 0, 3, NotJudged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := Row{Figure: "x", Unit: tc.unit, Base: val(tc.base, "b"), New: val(tc.new, "n")}
			if tc.base >= 0 && tc.new >= 0 {
				setDelta(&row)
			}
			judgeFinding(&row, tc.rules)
			if row.Judgement != tc.want {
				t.Fatalf("judgement %q (%s), want %q", row.Judgement, row.Why, tc.want)
			}
		})
	}
	if loose.PassToFail || loose.NewRestarts || !def.PassToFail || !def.NewRestarts {
		t.Fatalf("boolean overrides: default %+v, loose %+v", def, loose)
	}
	if err := (Rules{P99Increase: -1}).Check(); err == nil {
		t.Error("a negative margin passed Check")
	}
}

// TestPassToFailOff: with passToFail off a failed assertion is shown but
// not judged.
func TestPassToFailOff(t *testing.T) {
	t.Parallel()
	base := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	tight := saved(t, recordtest.Run(recordtest.Options{Scale: 10}))
	if err := scenario.OverrideAssertion(tight.Scenario.Assertions, "auth-p99-during-brownout.maxLatency=10ms"); err != nil {
		t.Fatal(err)
	}
	tight.Rejudge()
	rules := DefaultRules()
	rules.PassToFail = false
	rep, err := Runs(base, tight, Options{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() {
		t.Fatalf("regressed with passToFail off: %v", rep.Regressions)
	}
}

// TestFormatDelta pins the delta texts.
func TestFormatDelta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		unit      string
		base, new float64
		want      string
	}{
		{"ms", 40, 50, "+10.0ms (+25%)"},
		{"ms", 50, 40, "-10.0ms (-20%)"},
		{"ms", 0, 0, "+0ms"},
		{"ratio", 0.001, 0.004, "+0.30 pts"},
		{"req/s", 100, 90, "-10.0/s (-10%)"},
		{"s", 4, 5.5, "+1.5 s (+38%)"},
		{"count", 0, 2, "+2"},
		// Tenfold and more: a factor, not thousands of percent.
		{"ms", 10, 99, "+89.0ms (+890%)"},
		{"ms", 10, 100, "+90.0ms (x10.0)"},
		{"ms", 27.6, 3060, "+3.03s (x111)"},
		{"ms", 10, 5058.7, "+5.05s (x506)"},
		{"s", 0.5, 6, "+5.5 s (x12.0)"},
		{"req/s", 2, 1000, "+998.0/s (x500)"},
		{"ms", 500, 1, "-499ms (-100%)"},
	} {
		if got := FormatDelta(tc.unit, tc.base, tc.new); got != tc.want {
			t.Errorf("FormatDelta(%s, %v, %v) = %q, want %q", tc.unit, tc.base, tc.new, got, tc.want)
		}
	}
}
