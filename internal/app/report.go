package app

import (
	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/runner"
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
			opts := runner.ReportOptions{Path: args[0], Sets: f.set, Stdout: g.Stdout, Logger: g.Logger}
			if fl := cmd.Flag("out"); fl != nil && fl.Changed {
				opts.Out = g.Out
			}
			return runner.Report(opts)
		},
	}
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "override an assertion field before judging: <assertion>.<field>=<value> (repeatable)")
	return cmd
}
