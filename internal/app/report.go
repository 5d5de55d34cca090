package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/scenario"
)

// reportFlags are the flags of drill report.
type reportFlags struct {
	set []string
}

// newReportCommand is `drill report run.json [--out DIR] [--set
// <assertion>.<field>=<value> ...]`: it re-judges a saved run
// (docs/DESIGN.md §13) with bounds optionally overridden, rewrites run.json,
// junit.xml and report.html, prints the summary and exits by the verdict.
func newReportCommand(g *Globals) *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report RUN.json|DIR",
		Short: "Re-judge a saved run and re-render its reports",
		Long: `report reads a run.json written by drill run, judges the scenario's
assertions again over the recorded plan, events and measurements, writes
run.json, junit.xml and report.html, prints the summary and exits with the
verdict's code (0 pass, 1 an assertion failed, 4 invalid measurement, 5
cleanup unverified).

Given a run's report directory, it reads its run.json. A run killed before
it wrote run.json (SIGKILL, a lost machine) left its journal there
(seconds.jsonl: the scenario and plan, the events and every second it
measured): report then judges the run on the seconds that exist, windows
that never finished get the verdict aborted, and it exits 3 (ABORTED).

--out defaults to the directory of run.json; with --set it defaults to a new
directory rejudged-<UTC time> beside run.json, so the recorded run keeps its
own bounds and verdict. --set changes an assertion's field before judging,
written as in a scenario file; repeat it as needed:

  drill report reports/payment-tax-brownout-20260101T120000Z/run.json \
    --set auth-p99.maxLatency=150ms --set tax-lane-recovers.within=8s`,
		Args: exactArgs(1, "the run.json to re-judge"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := filepath.Dir(args[0])
			if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
				out = args[0]
			}
			if len(f.set) > 0 {
				out = filepath.Join(out, "rejudged-"+time.Now().UTC().Format("20060102T150405Z"))
			}
			if fl := cmd.Flag("out"); fl != nil && fl.Changed {
				out = g.Out
			}
			return runReport(g, args[0], out, f.set)
		},
	}
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "override an assertion field before judging: <assertion>.<field>=<value> (repeatable)")
	return cmd
}

// loadRun reads the record a report is made from. path is a run.json, or
// a run's report directory (its run.json). When that run.json does not
// exist but the run's journal (record.JournalFile) does, the run was
// killed before it wrote run.json: the record is rebuilt from the journal
// (record.Recover; aborted, exit 3). Errors: neither can be read.
func loadRun(path string) (*record.Run, error) {
	dir, file := path, filepath.Join(path, "run.json")
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		dir, file = filepath.Dir(path), path
	}
	run, err := record.Load(file)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return run, err
	}
	rec, rerr := record.Recover(dir)
	if rerr != nil {
		if errors.Is(rerr, record.ErrNoJournal) {
			return nil, fmt.Errorf("%w (and no run journal %s beside it)", err, record.JournalFile)
		}
		return nil, rerr
	}
	return rec, nil
}

// checkReportOut refuses an output directory that holds another run's
// record (its run.json names another run id): re-rendering there would
// replace that run's reports with this one's and lose it. A directory of
// this run, an empty one or a new one is fine. Errors name the directory
// and the other run.
func checkReportOut(out, runID string) error {
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		return nil // nothing recorded there (or unreadable: WriteAll says so)
	}
	var head struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal(b, &head) != nil || head.RunID == "" || head.RunID == runID {
		return nil
	}
	return fmt.Errorf("--out %s: it holds the reports of run %s, not of run %s; pick another --out", out, head.RunID, runID)
}

// validationErrors returns s's semantic problems, one message each, without
// its file name (a recorded scenario has no positions).
func validationErrors(s *scenario.Scenario) []string {
	var out []string
	if e := scenario.AsErrors(s.Validate()); e != nil {
		for _, x := range e.List {
			c := *x
			c.File = ""
			out = append(out, c.Error())
		}
	}
	return out
}

// runReport loads path, applies the overrides, re-judges, writes the
// reports into out and prints the summary. Its error carries the exit
// code: 2 for an unreadable record or a bad --set, 3 when the reports
// cannot be written, else the verdict's code (nil for 0).
func runReport(g *Globals, path, out string, sets []string) error {
	run, err := loadRun(path)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if run.Scenario == nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("load run record %s: it has no scenario to re-judge", path))
	}
	var errs []error
	// Problems the recorded scenario already had are not the overrides'
	// doing (and did not stop the run): only new ones are refused.
	had := map[string]bool{}
	if len(sets) > 0 {
		for _, e := range validationErrors(run.Scenario) {
			had[e] = true
		}
	}
	for _, s := range sets {
		if err := scenario.OverrideAssertion(run.Scenario.Assertions, s); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && len(sets) > 0 {
		for _, e := range validationErrors(run.Scenario) {
			if !had[e] {
				errs = append(errs, fmt.Errorf("--set: %s", e))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if err := checkReportOut(out, run.RunID); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	before := run.ExitCode
	code := run.Rejudge()
	g.Logger.Info("re-judged run", "run", run.RunID, "exit_before", before, "exit_now", code, "overrides", len(sets))
	if err := report.WriteAll(out, run); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("write reports: %w", err))
	}
	if err := report.Summary(g.Stdout, run); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("print summary: %w", err))
	}
	fmt.Fprintf(g.Stdout, "reports: %s\n", out)
	if code == exitcode.OK {
		return nil
	}
	_, why := run.Decide()
	return exitcode.Wrap(code, errors.New(why))
}
