package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two recorded CI-size runs of the short orders drill (testdata/runs).
const (
	night1 = "testdata/runs/orders-db-brownout-short/night-1"
	night2 = "testdata/runs/orders-db-brownout-short/night-2"
)

// TestCompareRealRuns: two real runs of one drill compare with exit 0;
// the same run re-judged with a tighter bound (drill report --set)
// compares as a regression, exit 1, naming the assertion; the rule can be
// switched off by a flag; -o json is for machines.
func TestCompareRealRuns(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	code, stdout, stderr := drill(t, "compare", night1, night2+"/run.json")
	if code != 0 || !strings.Contains(stdout, "COMPARE: NO REGRESSION (exit 0)") {
		t.Fatalf("two real runs: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	tight := filepath.Join(t.TempDir(), "tight")
	if code, _, stderr := drill(t, "report", night2+"/run.json", "--set", "baseline-p99.maxLatency=1ms", "--out", tight); code != 1 {
		t.Fatalf("report --set: exit %d, stderr:\n%s", code, stderr)
	}
	code, stdout, stderr = drill(t, "compare", night2, tight)
	if code != 1 || !strings.Contains(stdout, "REGRESSED assertion baseline-p99: passed in the baseline") ||
		!strings.Contains(stderr, "regression: assertion baseline-p99") {
		t.Fatalf("tighter bound: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := drill(t, "compare", "--pass-to-fail=false", night2, tight); code != 0 {
		t.Errorf("--pass-to-fail=false: exit %d, stderr:\n%s", code, stderr)
	}

	// The new run's scenario compare: section overrides the defaults, and
	// a flag overrides the section.
	b, err := os.ReadFile(filepath.Join(tight, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["scenario"].(map[string]any)["compare"] = map[string]any{"passToFail": false}
	b, _ = json.Marshal(m)
	lenient := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(lenient, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := drill(t, "compare", night2, lenient); code != 0 {
		t.Errorf("compare: passToFail: false in the scenario: exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, _ := drill(t, "compare", "--pass-to-fail=true", night2, lenient); code != 1 {
		t.Errorf("--pass-to-fail=true over the scenario's false: exit %d, want 1", code)
	}

	code, stdout, _ = drill(t, "compare", "-o", "json", night2, tight)
	var rep struct {
		Regressions []string `json:"regressions"`
		Rules       struct {
			P99Increase float64 `json:"p99Increase"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 || len(rep.Regressions) != 1 || rep.Rules.P99Increase != 0.2 {
		t.Fatalf("-o json: exit %d, err %v, %+v", code, err, rep)
	}
}

// TestCompareBadInput: a missing or truncated run, a run of another
// scenario (without --force) and a bad -o are exit 2 naming what is
// wrong; an invalid run is exit 4.
func TestCompareBadInput(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	dir := t.TempDir()
	trunc := filepath.Join(dir, "run.json")
	b, err := os.ReadFile(night1 + "/run.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunc, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.json")
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["scenarioDigest"] = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	ob, _ := json.Marshal(m)
	if err := os.WriteFile(other, ob, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing", []string{night1, filepath.Join(dir, "nope")}, 2, "nope: no such file"},
		{"truncated", []string{night1, trunc}, 2, trunc + ": not a JSON run record"},
		{"empty directory", []string{night1, dir + "/"}, 2, "run.json"},
		{"other scenario", []string{night1, other}, 2, "runs of different scenarios"},
		{"other scenario forced", []string{"--force", night1, other}, 0, ""},
		{"invalid run", []string{"--force", night1, "internal/findings/testdata/orders-db-brownout.run.json"}, 4, "not comparable: new run internal/findings/testdata/orders-db-brownout.run.json is invalid: the measurement is invalid: load generator behind schedule"},
		{"bad output", []string{"-o", "yaml", night1, night2}, 2, `invalid -o "yaml"`},
		{"one argument", []string{night1}, 2, "takes 2 argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := drill(t, append([]string{"compare"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr:\n%s\nwant it to contain %q", code, tc.code, stderr, tc.want)
			}
		})
	}
}
