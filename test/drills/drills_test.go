package drills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// scenarioDir holds the shortened drills, relative to this package.
const scenarioDir = "../../testdata/scenarios/drills"

// keepEnv, when set, keeps every run's reports (a failed test keeps them anyway).
const keepEnv = "DRILL_DRILLS_KEEP"

// runLimit bounds one `drill run` (a shortened drill takes about 50 s with
// its start-up and cleanup). On expiry drill gets SIGTERM, which reverts
// faults and writes reports, and SIGKILL killGrace later.
const (
	runLimit  = 3 * time.Minute
	killGrace = 60 * time.Second
)

// drillCase is one shortened drill: the scenario file (without .yaml) in
// scenarioDir and, where the verdicts alone do not show it, a check that
// the run went the way the drill exists for (a naive run's restarts came
// from its liveness probe). Which assertions must fail is the scenario's
// own declaration (expect.fail), never a list kept here.
type drillCase struct {
	file string
	// also checks more than the verdicts; nil when they say it all.
	also func(t *testing.T, run *record.Run)
}

// expectOf loads the scenario at path and returns the exit code a right
// run ends with (1 when its expect.fail names assertions, else 0) and the
// declared assertions.
func expectOf(t *testing.T, path string) (int, []string) {
	t.Helper()
	s, err := scenario.Load(path)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	if s.Expect == nil || len(s.Expect.Fail) == 0 {
		return record.ExitPass, nil
	}
	return record.ExitFail, s.Expect.Fail
}

// checkExpectation fails t unless exactly the assertions the scenario
// declared in expect.fail failed, as run.json records them, and every
// other passed; declared is the scenario file's list, which the run's
// plan must carry too.
func checkExpectation(t *testing.T, run *record.Run, declared []string) {
	t.Helper()
	e := run.Expectation()
	if !slices.Equal(e.Declared, declared) {
		t.Errorf("run.json's plan declares %v to fail, the scenario %v", e.Declared, declared)
	}
	if !e.Right() {
		t.Errorf("wrong verdicts: %s; results:\n%s", e, results(run))
	}
}

// TestDrillPairs runs each shortened drill pair with the drill binary as a
// child process, one run after another: the correct build must pass every
// assertion (exit 0) and the naive twin must fail on exactly the
// assertions its expect.fail declares (exit 1), as run.json records the
// verdicts. Exit 4 (invalid measurement) fails the test with drill's
// validity message.
func TestDrillPairs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the twenty drills take about 18 minutes")
	}
	needPostgres(t)
	work := workDir(t)
	drill := buildDrill(t, work)

	cases := []drillCase{
		{file: "orders-db-brownout"},
		{file: "orders-db-brownout-naive", also: restartedByLiveness("pg-pause")},
		{file: "payment-tax-brownout"},
		{file: "payment-tax-brownout-naive"},
		{file: "payment-tax-timeout"},
		{file: "payment-tax-timeout-naive"},
		{file: "payment-lane-overload"},
		{file: "payment-lane-overload-naive"},
		{file: "orders-overload-routing"},
		{file: "orders-overload-routing-naive"},
		{file: "probe-tutorial-latency", also: tutorialClaimsReported},
		{file: "probe-tutorial-latency-naive", also: restartedByLiveness("db-latency")},
		{file: "orders-rollout", also: rolledOut},
		{file: "orders-rollout-naive", also: rolledOut},
		{file: "orders-cold-start"},
		{file: "orders-cold-start-naive", also: restartedByLiveness("cold-kill")},
		{file: "orders-vendor-brownout"},
		{file: "orders-vendor-brownout-naive", also: restartedByLiveness("vendor-slow")},
		{file: "orders-db-blips", also: singleProbeFailures(blips...)},
		{file: "orders-db-blips-naive", also: singleProbeFailures(blips...)},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			file, err := filepath.Abs(filepath.Join(scenarioDir, c.file+".yaml"))
			if err != nil {
				t.Fatalf("find scenario: %v", err)
			}
			wantExit, declared := expectOf(t, file)
			out := filepath.Join(work, c.file)
			code, console := runDrill(t, drill, file, out, filepath.Join(work, "state"))
			runJSON := filepath.Join(out, "run.json")
			run, loadErr := record.Load(runJSON)
			if run != nil {
				logRun(t, run)
			}
			switch {
			case code == record.ExitInvalid:
				why := testproc.Tail(console, 5)
				if run != nil {
					why = run.Validity.Summary()
					if run.Validity.Valid() {
						why = run.Error
					}
				}
				t.Fatalf("drill exited 4: the measurement is invalid, so no verdict can be trusted: %s (run.json: %s)", why, runJSON)
			case code != record.ExitPass && code != record.ExitFail:
				t.Fatalf("drill exited %d, want %d; the last lines it printed:\n%s", code, wantExit, testproc.Tail(console, 15))
			case loadErr != nil:
				t.Fatalf("drill exited %d but its record cannot be read: %v", code, loadErr)
			case run.ExitCode != code:
				t.Errorf("run.json says exit %d, the process exited %d", run.ExitCode, code)
			}
			if code != wantExit {
				t.Fatalf("drill exited %d (%s), want %d; results:\n%s(run.json: %s)", code, run.Error, wantExit, results(run), runJSON)
			}
			checkExpectation(t, run, declared)
			if c.also != nil {
				c.also(t, run)
			}
			if t.Failed() {
				t.Logf("run.json: %s", runJSON)
			}
		})
	}
}

// restartedByLiveness checks a naive build under a database fault failed
// no-restarts because its liveness probe failed (MC-CF-01, INV-HLT-01),
// and that no replica restarted before the fault began.
func restartedByLiveness(fault string) func(t *testing.T, run *record.Run) {
	return func(t *testing.T, run *record.Run) {
		t.Helper()
		restartedByLivenessIn(t, run, fault)
	}
}

func restartedByLivenessIn(t *testing.T, run *record.Run, fault string) {
	t.Helper()
	res := mustResult(t, run, "no-restarts")
	if res.Verdict != assert.Fail || res.Figure.Value < 1 {
		t.Fatalf("no-restarts: %s (%s), want a failure with at least one restart", res.Verdict, res.Figure.Text)
	}
	pause, ok := run.Plan.Window("fault:" + fault)
	if !ok {
		t.Fatalf("the plan has no window fault:%s", fault)
	}
	liveness := 0
	for _, ev := range res.Evidence {
		if ev.At < pause.Start {
			t.Errorf("no-restarts: %s restarted at %s, before the pause began at %s: %s; its last log lines: %q",
				ev.Pod, assert.FormatOffset(ev.At), assert.FormatOffset(pause.Start), ev.Detail, ev.Logs)
		}
		if strings.Contains(ev.Detail, "liveness probe") {
			liveness++
		}
	}
	if liveness == 0 {
		t.Errorf("no-restarts: no evidence names the liveness probe: %s", res.Message)
	}
}

// blips are the faults of the orders-db-blips drills, in order.
var blips = []string{"blip-1", "blip-2", "blip-3", "blip-4"}

// singleProbeFailures checks the premise of the orders-db-blips drills:
// each of the faults (in the order they begin) made every replica of
// order-gateway fail at least one readiness probe before the next one
// began (the last: before the run ended), and no replica failed as many
// as 3 in a row, the correct build's failureThreshold. So the correct
// build's verdicts were judged on failed probes that its hysteresis must
// absorb, and the twin's on the same failures, not on a longer outage.
func singleProbeFailures(faults ...string) func(t *testing.T, run *record.Run) {
	return func(t *testing.T, run *record.Run) {
		t.Helper()
		starts := make([]time.Duration, 0, len(faults)+1)
		for _, f := range faults {
			w, ok := run.Plan.Window("fault:" + f)
			if !ok {
				t.Fatalf("the plan has no window fault:%s", f)
			}
			starts = append(starts, w.Start)
		}
		starts = append(starts, run.Plan.Duration)
		// Per pod, from the first fault's start: the readiness probes that
		// failed, and the longest run of failures in a row.
		type probes struct {
			failed      []time.Duration
			inRow, most int
		}
		pods := map[string]*probes{}
		for _, e := range run.Events {
			if e.Kind != event.ProbeResult || e.Probe != event.ProbeReadiness || e.Service != "order-gateway" || e.At < starts[0] {
				continue
			}
			p := pods[e.Pod]
			if p == nil {
				p = &probes{}
				pods[e.Pod] = p
			}
			if e.OK {
				p.inRow = 0
				continue
			}
			p.failed = append(p.failed, e.At)
			p.inRow++
			p.most = max(p.most, p.inRow)
		}
		if len(pods) != 3 {
			t.Errorf("readiness results of %d order-gateway pods after %s began, want 3", len(pods), faults[0])
		}
		for _, pod := range slices.Sorted(maps.Keys(pods)) {
			p := pods[pod]
			var per []string
			for i, f := range faults {
				n := 0
				for _, at := range p.failed {
					if at >= starts[i] && at < starts[i+1] {
						n++
					}
				}
				per = append(per, fmt.Sprintf("%s: %d", f, n))
				if n == 0 {
					t.Errorf("%s failed no readiness probe between the start of %s (%s) and %s: the blip never reached its probe",
						pod, f, assert.FormatOffset(starts[i]), assert.FormatOffset(starts[i+1]))
				}
			}
			t.Logf("%s: failed readiness probes %s; at most %d in a row", pod, strings.Join(per, ", "), p.most)
			if p.most >= 3 {
				t.Errorf("%s failed %d readiness probes in a row: a blip outlasted the hysteresis it is meant to test", pod, p.most)
			}
		}
	}
}

// rolledOut checks the rollout did what the drill is about: each of the
// three old replicas was deleted by the rollout fault, the rollout ran to
// completion, and those replacements did not count as restarts.
func rolledOut(t *testing.T, run *record.Run) {
	t.Helper()
	deleted, complete := 0, false
	for _, e := range run.Events {
		switch {
		case e.Kind == event.PodDeleted && e.Fault == "rollout":
			deleted++
		case e.Kind == event.Note && e.Reason == localenv.ReasonRolloutComplete:
			complete = true
		}
	}
	if deleted != 3 || !complete {
		t.Errorf("rollout: %d pods deleted by it (want 3), complete %t (want true)", deleted, complete)
	}
	if res := mustResult(t, run, "no-restarts"); res.Verdict != assert.Pass {
		t.Errorf("no-restarts: %s (%s), want pass: pods the rollout replaced are no restarts", res.Verdict, res.Figure.Text)
	}
}

// tutorialClaimsReported checks the hardened build's run says what it
// measured beside each of the tutorial's claims (findings of kind claim),
// and that the new routing assertions were judged, not skipped.
func tutorialClaimsReported(t *testing.T, run *record.Run) {
	t.Helper()
	claims := 0
	for _, f := range run.Findings {
		if f.Kind == findings.KindClaim {
			claims++
			if !strings.Contains(f.Text, "measured") {
				t.Errorf("claim finding without the measured time: %s", f.Text)
			}
		}
	}
	if claims != 2 {
		t.Errorf("%d claim findings, want 2 (unready-at-T35, back-at-T57.2)", claims)
	}
	for _, name := range []string{"left-routing", "back-in-routing"} {
		if res := mustResult(t, run, name); res.Verdict != assert.Pass {
			t.Errorf("%s: %s: %s", name, res.Verdict, res.Message)
		}
	}
}

// mustResult returns the result of the assertion named name.
func mustResult(t *testing.T, run *record.Run, name string) assert.Result {
	t.Helper()
	for _, r := range run.Results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("run.json has no result for assertion %s", name)
	return assert.Result{}
}

// results lists every result with its verdict, figure, bound and message.
func results(run *record.Run) string {
	if run == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range run.Results {
		fmt.Fprintf(&b, "  %-5s %s: %s\n", r.Verdict, r.Name, r.Message)
	}
	return b.String()
}

// logRun logs the figures of a run: each assertion's verdict, figure and
// bound, and each stream's late requests (the validity check's input).
func logRun(t *testing.T, run *record.Run) {
	t.Helper()
	for _, r := range run.Results {
		t.Logf("%-5s %-24s %-16s bound %s", r.Verdict, r.Name, r.Figure.Text, r.Bound)
	}
	if run.Plan == nil {
		return
	}
	for name, s := range run.Series {
		if s == nil {
			continue
		}
		b := s.Window(run.Plan.Warmup, run.Plan.Duration)
		if b.Requests == 0 {
			continue
		}
		line := fmt.Sprintf("stream %s: %d requests, %d late (%.2f%%)", name, b.Requests, b.Late,
			100*float64(b.Late)/float64(b.Requests))
		if b.Lag != nil {
			line += fmt.Sprintf(", dispatch lag p99 %.1fms max %.1fms",
				float64(b.Lag.Quantile(99).Microseconds())/1000, float64(b.Lag.Max().Microseconds())/1000)
		}
		t.Log(line)
	}
}

// runDrill runs `drill run --out out --state-dir state scenario` and
// returns its exit code and what it printed. It fails t when drill cannot
// be started or does not end within runLimit.
func runDrill(t *testing.T, drill, scenario, out, state string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, drill, "run", "--out", out, "--state-dir", state, scenario)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = killGrace
	var console bytes.Buffer
	cmd.Stdout = &console
	cmd.Stderr = &console
	started := time.Now()
	err := cmd.Run()
	if werr := os.WriteFile(out+".log", console.Bytes(), 0o644); werr != nil {
		t.Errorf("keep drill's output: %v", werr)
	}
	t.Logf("drill run %s: %s", filepath.Base(scenario), time.Since(started).Round(time.Second))
	if ctx.Err() != nil {
		t.Fatalf("drill run did not end within %s; the last lines it printed:\n%s", limit(t), testproc.Tail(console.Bytes(), 15))
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), console.Bytes()
	}
	if err != nil {
		t.Fatalf("run drill: %v", err)
	}
	return 0, console.Bytes()
}

// limit is runLimit, or less when the test's deadline is nearer.
func limit(t *testing.T) time.Duration {
	d := runLimit
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - killGrace - 10*time.Second; left < d {
			d = left
		}
	}
	if d < time.Second {
		d = time.Second
	}
	return d
}

// buildDrill builds ./cmd/drill into dir and returns the binary's path.
func buildDrill(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("find module root: %v", err)
	}
	bin := filepath.Join(dir, "drill")
	cmd := exec.Command(testproc.GoTool(), "build", "-o", bin, "./cmd/drill")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build drill: %v\n%s", err, out)
	}
	return bin
}

// workDir makes the directory for the binary, the runs' reports and fault
// journals. It is removed after the test unless the test failed or
// DRILL_DRILLS_KEEP is set, in which case its path is logged.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "drill-drills-")
	if err != nil {
		t.Fatalf("create work dir: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv(keepEnv) != "" {
			t.Logf("kept the runs' reports in %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove work dir: %v", err)
		}
	})
	return dir
}

// needPostgres skips t (under CI=true: fails it) unless PostgreSQL's server
// binaries are where drill looks for them: on PATH or in Debian's
// /usr/lib/postgresql/<version>/bin, which a fresh `apt-get install
// postgresql` does not put on PATH.
func needPostgres(t *testing.T) {
	t.Helper()
	_, err := dependencies.LookPostgres()
	needs.Part(t, "PostgreSQL server binaries (the drills' databases)", err)
}
