package history

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./internal/history -update to accept):\n%s", name, got)
	}
}

const realRuns = "../../testdata/runs/orders-db-brownout-short"

// TestGoldenRealNights: three recorded CI-size runs of the short orders
// drill tabulate per figure (golden text) with no regression, and the
// trend page has one plot per figure.
func TestGoldenRealNights(t *testing.T) {
	t.Parallel()
	nights, err := Load([]string{realRuns}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nights) != 3 {
		t.Fatalf("%d nights, want 3", len(nights))
	}
	j, err := Judge(nights, 5, compare.DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	rep := Build(nights, j)
	if rep.ExitCode() != exitcode.OK {
		t.Fatalf("regressions: %v", j.Regressions)
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "orders-real.txt", bytes.ReplaceAll(text.Bytes(), []byte(realRuns), []byte("RUNS")))
	var page bytes.Buffer
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), `src="data:image/png;base64,`); n != len(rep.Figures) || n < 20 {
		t.Errorf("%d plots for %d figures", n, len(rep.Figures))
	}
}

// nightly saves n synthetic nights of the tax drill under dir, one report
// directory each, a day apart; change edits night i before it is judged
// and saved.
func nightly(t *testing.T, dir string, n int, change func(i int, r *record.Run)) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := recordtest.Run(recordtest.Options{Scale: 10})
		r.RunID = fmt.Sprintf("night-%02d", i+1)
		r.StartedAt = time.Date(2026, 1, 1+i, 2, 0, 0, 0, time.UTC)
		if change != nil {
			change(i, r)
		}
		if err := r.Save(filepath.Join(dir, fmt.Sprintf("payment-tax-brownout-2026010%dT020000Z", i+1), "run.json")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJudgeTighterBoundNewest: a newest night re-judged with a tighter
// bound is a regression naming the assertion (exit 1).
func TestJudgeTighterBoundNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, 4, func(i int, r *record.Run) {
		if i == 3 {
			if err := scenario.OverrideAssertion(r.Scenario.Assertions, "auth-p99-during-brownout.maxLatency=10ms"); err != nil {
				t.Fatal(err)
			}
			r.Rejudge()
		}
	})
	nights, err := Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := Judge(nights, 5, compare.DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Regressions) != 1 || !strings.Contains(j.Regressions[0], "auth-p99-during-brownout") || len(j.Baseline) != 3 {
		t.Fatalf("regressions %q, baseline %v", j.Regressions, j.Baseline)
	}
	if Build(nights, j).ExitCode() != exitcode.AssertionFailed {
		t.Fatal("exit code is not 1")
	}
}

// TestLoadSelection: --last, --since, re-judged copies counted once,
// --scenario, and the bad inputs (each exit 2 naming the path).
func TestLoadSelection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, 5, nil)
	// A re-judged copy inside night 2's report directory has its run id.
	r, err := record.Load(filepath.Join(dir, "payment-tax-brownout-20260102T020000Z", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Save(filepath.Join(dir, "payment-tax-brownout-20260102T020000Z", "rejudged-x", "run.json")); err != nil {
		t.Fatal(err)
	}
	ids := func(ns []Night) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.RunID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name string
		opt  Options
		want string
	}{
		{"all", Options{}, "night-01,night-02,night-03,night-04,night-05"},
		{"last 2", Options{Last: 2}, "night-04,night-05"},
		{"since Jan 3", Options{Since: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)}, "night-03,night-04,night-05"},
		{"since and last", Options{Since: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Last: 1}, "night-05"},
		{"scenario", Options{Scenario: "payment-tax-brownout"}, "night-01,night-02,night-03,night-04,night-05"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := Load([]string{dir}, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(ns); got != tc.want {
				t.Fatalf("nights %s, want %s", got, tc.want)
			}
		})
	}

	empty := t.TempDir()
	trunc := filepath.Join(t.TempDir(), "run.json")
	b, _ := os.ReadFile(filepath.Join(dir, "payment-tax-brownout-20260101T020000Z", "run.json"))
	os.WriteFile(trunc, b[:100], 0o644)
	corrupt := filepath.Join(t.TempDir(), "run.json")
	os.WriteFile(corrupt, []byte("\x00garbage"), 0o644)
	foreign := filepath.Join(t.TempDir(), "run.json")
	os.WriteFile(foreign, []byte(`{"schemaVersion":"drill.dev/run/v0"}`), 0o644)
	// A directory of nights with one truncated among them.
	mixed := t.TempDir()
	nightly(t, mixed, 2, nil)
	mixedBad := filepath.Join(mixed, "payment-tax-brownout-20260102T020000Z", "run.json")
	os.WriteFile(mixedBad, b[:len(b)/3], 0o644)
	other := t.TempDir()
	nightly(t, other, 1, func(_ int, r *record.Run) { r.RunID = "other-01"; r.Scenario.Streams[0].Rate.Freq++ })
	for _, tc := range []struct {
		name  string
		paths []string
		opt   Options
		want  string
	}{
		{"no runs", []string{empty}, Options{}, "no run.json under " + empty},
		{"missing", []string{filepath.Join(empty, "nope")}, Options{}, "nope"},
		{"truncated", []string{trunc}, Options{}, trunc + ": not a JSON run record"},
		{"corrupt", []string{corrupt}, Options{}, corrupt + ": not a JSON run record"},
		{"other schema version", []string{foreign}, Options{}, foreign + `: run record schema "drill.dev/run/v0" is not supported`},
		{"one truncated among good nights", []string{mixed}, Options{}, mixedBad + ": not a JSON run record"},
		{"other scenario", []string{dir, other}, Options{}, "runs of different scenarios"},
		{"none since", []string{dir}, Options{Since: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}, "started since 2027-01-01"},
		{"unknown scenario", []string{dir}, Options{Scenario: "nope"}, `no run of scenario "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.paths, tc.opt)
			if err == nil || exitcode.Code(err) != exitcode.BadInput || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v (exit %d), want exit 2 containing %q", err, exitcode.Code(err), tc.want)
			}
		})
	}
	if ns, err := Load([]string{dir, other}, Options{Force: true}); err != nil || len(ns) != 6 {
		t.Fatalf("--force: %d nights, %v", len(ns), err)
	}
}

func night(id string, comparable bool, figs map[Key]Point) Night {
	n := Night{RunID: id, Path: id + "/run.json", Comparable: comparable, Figures: figs}
	if !comparable {
		n.Why = "load generator behind schedule"
	}
	for k := range figs {
		n.Order = append(n.Order, k)
	}
	return n
}

// TestJudgeMedian: the baseline is the median of the previous K
// comparable nights; invalid nights are skipped; an invalid newest night
// is exit 4; an assertion regresses when it passed on at least half of
// them.
func TestJudgeMedian(t *testing.T) {
	t.Parallel()
	p99 := Key{SectionStream, "orders", "run", compare.FigureOKP99}
	rec := Key{SectionFinding, "recovery orders after pg-pause", "", "recovery"}
	as := Key{SectionAssertion, "baseline-p99", "baseline", "figure"}
	ms := func(v float64, verdict string) map[Key]Point {
		return map[Key]Point{p99: {Value: v, Unit: "ms", Text: fmt.Sprint(v)}, as: {Value: v, Unit: "ms", Verdict: verdict}}
	}
	for _, tc := range []struct {
		name   string
		nights []Night
		k      int
		want   []string // regressed figures
		base   float64  // the p99 median
	}{
		{"steady", []Night{night("1", true, ms(40, "pass")), night("2", true, ms(42, "pass")), night("3", true, ms(44, "pass"))}, 5, nil, 41},
		{"p99 up beyond the median", []Night{night("1", true, ms(40, "pass")), night("2", true, ms(100, "pass")), night("3", true, ms(41, "pass")), night("4", true, ms(60, "pass"))}, 5, []string{compare.FigureOKP99}, 41},
		{"k=1 takes only the night before", []Night{night("1", true, ms(10, "pass")), night("2", true, ms(55, "pass")), night("3", true, ms(60, "pass"))}, 1, nil, 55},
		{"invalid nights are skipped", []Night{night("1", true, ms(40, "pass")), night("2", false, ms(400, "pass")), night("3", true, ms(41, "pass"))}, 5, nil, 40},
		{"assertion fails after passing on most nights", []Night{night("1", true, ms(40, "fail")), night("2", true, ms(40, "pass")), night("3", true, ms(40, "pass")), night("4", true, ms(40, "fail"))}, 5, []string{"figure"}, 40},
		{"assertion failing on most nights is no news", []Night{night("1", true, ms(40, "fail")), night("2", true, ms(40, "fail")), night("3", true, ms(40, "pass")), night("4", true, ms(40, "fail"))}, 5, nil, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Judge(tc.nights, tc.k, compare.DefaultRules())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range j.Rows {
				if r.Judgement == compare.Regression {
					got = append(got, r.Figure)
				}
				if r.Figure == compare.FigureOKP99 && r.Base.Value != tc.base {
					t.Errorf("p99 median %v, want %v", r.Base.Value, tc.base)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("regressed %v, want %v (%v)", got, tc.want, j.Regressions)
			}
		})
	}
	never := func(v float64) map[Key]Point { return map[Key]Point{rec: {Value: v, Unit: "s", Text: fmt.Sprint(v)}} }
	j, err := Judge([]Night{night("1", true, never(2)), night("2", true, never(-1)), night("3", true, never(2)), night("4", true, never(-1))}, 5, compare.DefaultRules())
	if err != nil || len(j.Regressions) != 1 || j.Rows[0].Base.Value != 2 {
		t.Fatalf("not recovered after a median of 2 s: %+v, %v", j, err)
	}
	if _, err := Judge([]Night{night("1", true, ms(1, "pass")), night("2", false, ms(1, "pass"))}, 5, compare.DefaultRules()); exitcode.Code(err) != exitcode.InvalidMeasurement {
		t.Fatalf("invalid newest: %v (exit %d), want exit 4", err, exitcode.Code(err))
	}
	var nc *NotComparableError
	if _, err := Judge([]Night{night("9", false, nil)}, 5, compare.DefaultRules()); !errors.As(err, &nc) || nc.Path != "9/run.json" {
		t.Fatalf("invalid newest names its path: %v", err)
	}
	if j, err := Judge([]Night{night("1", true, ms(1, "pass"))}, 5, compare.DefaultRules()); err != nil || j.Note == "" || j.Regressed() {
		t.Fatalf("one night: %+v %v", j, err)
	}
}

// TestNightTicks: at most maxTickLabels nights are labelled, evenly
// spaced, the first and the newest always.
func TestNightTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nights int
		want   string // labelled nights
	}{
		{0, ""},
		{1, "1"},
		{3, "1 2 3"},
		{8, "1 2 3 4 5 6 7 8"},
		{9, "1 3 5 7 9"},
		{12, "1 3 5 7 9 12"},
		{30, "1 5 9 13 17 21 25 30"},
		{40, "1 6 11 16 21 26 31 40"},
		{365, "1 47 93 139 185 231 277 365"},
		{366, "1 47 93 139 185 231 277 366"},
	} {
		t.Run(fmt.Sprint(tc.nights), func(t *testing.T) {
			var got []string
			for _, tk := range nightTicks(make([]Night, tc.nights)) {
				if tk.Label != "" {
					got = append(got, tk.Label)
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("labelled %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestLoadNamesUnfinishedNight: a report directory a killed run left (its
// per-second journal, no run.json) is handed to Options.Unfinished, once,
// by its path, and the readable nights are still loaded; a finished night
// is never reported.
func TestLoadNamesUnfinishedNight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nightly(t, dir, 2, nil)
	killed := filepath.Join(dir, "payment-tax-brownout-20260103T020000Z")
	if err := os.MkdirAll(killed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(killed, record.JournalFile), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var named []string
	ns, err := Load([]string{dir}, Options{Unfinished: func(d string) { named = append(named, d) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 {
		t.Errorf("%d nights loaded, want the 2 finished ones", len(ns))
	}
	if len(named) != 1 || named[0] != killed {
		t.Errorf("Unfinished called with %q, want once with %s", named, killed)
	}
}
