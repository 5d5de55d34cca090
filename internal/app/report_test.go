package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
)

// saveRun writes a synthetic run.json into a fresh directory.
func saveRun(t *testing.T, naive bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.json")
	if err := recordtest.Run(recordtest.Options{Naive: naive, Scale: 20}).Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReportCommandRejudges(t *testing.T) {
	path := saveRun(t, false)
	dir := filepath.Dir(path)
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), &out, &errOut, []string{"report", path}, nil)
	if code != exitcode.OK {
		t.Fatalf("drill report on a passing run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "VERDICT: PASS (exit 0)") || !strings.Contains(out.String(), "reports: "+dir) {
		t.Errorf("summary:\n%s", out.String())
	}
	for _, f := range []string{"run.json", "junit.xml", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written into the run's directory: %v", f, err)
		}
	}

	// A tighter bound turns the verdict; the new bound is kept in run.json.
	other := filepath.Join(t.TempDir(), "rejudged")
	out.Reset()
	errOut.Reset()
	code = Execute(context.Background(), &out, &errOut, []string{"report", path, "--out", other,
		"--set", "auth-p99-during-brownout.maxLatency=10ms", "--set", "tax-lane-recovers.within=1s"}, nil)
	if code != exitcode.AssertionFailed {
		t.Fatalf("tightened bounds: exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "drill: assertions failed: auth-p99-during-brownout, tax-lane-recovers") {
		t.Errorf("stderr: %s", errOut.String())
	}
	if !strings.Contains(out.String(), "FAIL     auth-p99-during-brownout") || !strings.Contains(out.String(), "p99 <= 10.0ms") {
		t.Errorf("summary:\n%s", out.String())
	}
	r, err := record.Load(filepath.Join(other, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 1 || r.Scenario.Assertions[0].MaxLatency.D().String() != "10ms" {
		t.Errorf("re-judged run.json: exit %d, bound %v", r.ExitCode, r.Scenario.Assertions[0].MaxLatency)
	}
	// The original is untouched.
	orig, err := record.Load(path)
	if err != nil || orig.ExitCode != 0 {
		t.Errorf("original run.json changed: %v %d", err, orig.ExitCode)
	}

	// Loosening the naive run's bounds makes it pass on latency.
	naive := saveRun(t, true)
	out.Reset()
	errOut.Reset()
	code = Execute(context.Background(), &out, &errOut, []string{"report", naive, "--set", "auth-p99-during-brownout.maxLatency=5s"}, nil)
	if code != exitcode.AssertionFailed || strings.Contains(errOut.String(), "auth-p99-during-brownout") ||
		!strings.Contains(out.String(), "PASS     auth-p99-during-brownout") {
		t.Errorf("loosened naive run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestReportCommandBadInput(t *testing.T) {
	path := saveRun(t, false)
	bad := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(bad, []byte(`{"schemaVersion":"drill.dev/run/v0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "takes 1 argument"},
		{[]string{"report", filepath.Join(t.TempDir(), "missing.json")}, "read run record"},
		{[]string{"report", bad}, `schema "drill.dev/run/v0" is not supported`},
		{[]string{"report", path, "--set", "nope.max=1"}, `no assertion named "nope"`},
		{[]string{"report", path, "--set", "auth-errors.maxRate=lots"}, "set auth-errors.maxRate=lots"},
		{[]string{"report", path, "--set", "auth-errors.maxRat=0.5"}, `unknown key "maxRat"; did you mean "maxRate"?`},
		{[]string{"report", path, "--set", "auth-errors.maxRate=1.5"}, "--set: assertions["},
	} {
		var out, errOut bytes.Buffer
		code := Execute(context.Background(), &out, &errOut, c.args, nil)
		if code != exitcode.BadInput || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("drill %v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestReportFindingsOfOlderRun: `drill report` of a run.json recorded
// before findings existed (a real orders-db-brownout run whose generator
// fell behind on a busy machine, hence exit 4) prints findings and writes
// them into the new run.json.
func TestReportFindingsOfOlderRun(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "findings", "testdata", "orders-db-brownout.run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(src, []byte(`"findings"`)) {
		t.Fatal("the recorded run already has findings; it must predate them")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "run.json")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), &out, &errOut, []string{"report", path}, nil)
	if code != exitcode.InvalidMeasurement {
		t.Fatalf("exit %d, want 4 (the recorded run was invalid)\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"\nFINDINGS\n",
		"WARNING  order-gateway had no ready replica in the local Service for 8.5 s (t=36.5-45.0 s), 7.6 s of it after pg-pause ended",
		"FINDINGS  2 warnings, 1 notice: read FINDINGS above",
		"11µs (local Service)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	r, err := record.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.FindingsSchema == "" || len(r.Findings) == 0 {
		t.Errorf("rewritten run.json has no findings (schema %q)", r.FindingsSchema)
	}
	junit, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err != nil || !bytes.Contains(junit, []byte(`<testcase name="findings"`)) {
		t.Errorf("junit.xml has no findings case (%v)", err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !bytes.Contains(html, []byte("Findings: what happened")) {
		t.Errorf("report.html has no findings box (%v)", err)
	}
}

// TestReportRefusesAnotherRunsDirectory: re-rendering a run into a
// directory that holds another run's reports would replace them and lose
// that run: exit 2, naming both runs, and the other run's files untouched.
func TestReportRefusesAnotherRunsDirectory(t *testing.T) {
	path := saveRun(t, false)
	victim := filepath.Dir(saveRun(t, true))
	other, err := record.Load(filepath.Join(victim, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	other.RunID = "another-run"
	if err := other.Save(filepath.Join(victim, "run.json")); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(victim, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), &out, &errOut, []string{"report", path, "--out", victim}, nil)
	if code != exitcode.BadInput {
		t.Fatalf("exit %d, want 2\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "holds the reports of run another-run") {
		t.Errorf("stderr: %s", errOut.String())
	}
	after, err := os.ReadFile(filepath.Join(victim, "run.json"))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the other run's run.json changed (%v)", err)
	}
}
