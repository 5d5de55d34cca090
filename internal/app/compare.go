package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
)

// compareFlags are the flags of drill compare.
type compareFlags struct {
	output string
	force  bool
	rules  ruleFlags
}

// ruleFlags are the regression-rule flags shared by compare and history.
type ruleFlags struct {
	p99Increase, errorRateIncrease, recoveryIncrease float64
	p99Slack, recoverySlack                          time.Duration
	newRestarts, passToFail                          bool
}

// add declares the rule flags on cmd.
func (r *ruleFlags) add(cmd *cobra.Command) {
	d := compare.DefaultRules()
	f := cmd.Flags()
	f.Float64Var(&r.p99Increase, "p99-increase", d.P99Increase, "p99 regression: worse by more than this fraction of the baseline's (and --p99-slack)")
	f.DurationVar(&r.p99Slack, "p99-slack", d.P99Slack, "p99 regression: worse by more than this (and --p99-increase)")
	f.Float64Var(&r.errorRateIncrease, "error-rate-increase", d.ErrorRateIncrease, "error rate regression: up by more than this ratio of requests (0.005 = 0.5 points)")
	f.Float64Var(&r.recoveryIncrease, "recovery-increase", d.RecoveryIncrease, "finding time (recovery, detection, unroutable) regression: worse by more than this fraction (and --recovery-slack)")
	f.DurationVar(&r.recoverySlack, "recovery-slack", d.RecoverySlack, "finding time regression: worse by more than this (and --recovery-increase)")
	f.BoolVar(&r.newRestarts, "new-restarts", d.NewRestarts, "more restarts of a service than in the baseline is a regression")
	f.BoolVar(&r.passToFail, "pass-to-fail", d.PassToFail, "an assertion that passed in the baseline and does not now is a regression")
}

// resolve returns the defaults, overridden by the scenario's compare
// section of run (if any), overridden by the flags the user set.
func (r *ruleFlags) resolve(cmd *cobra.Command, run *record.Run) compare.Rules {
	rules := compare.DefaultRules()
	if run != nil && run.Scenario != nil {
		rules = rules.With(run.Scenario.Compare)
	}
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	if set("p99-increase") {
		rules.P99Increase = r.p99Increase
	}
	if set("p99-slack") {
		rules.P99Slack = r.p99Slack
	}
	if set("error-rate-increase") {
		rules.ErrorRateIncrease = r.errorRateIncrease
	}
	if set("recovery-increase") {
		rules.RecoveryIncrease = r.recoveryIncrease
	}
	if set("recovery-slack") {
		rules.RecoverySlack = r.recoverySlack
	}
	if set("new-restarts") {
		rules.NewRestarts = r.newRestarts
	}
	if set("pass-to-fail") {
		rules.PassToFail = r.passToFail
	}
	return rules
}

// newCompareCommand is `drill compare BASE NEW`: it sets NEW beside BASE
// and exits 0 (no regression), 1 (regression), 2 (bad input) or 4 (either
// run invalid).
func newCompareCommand(g *Globals) *cobra.Command {
	var f compareFlags
	cmd := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Compare a run with a baseline run of the same scenario and judge regressions",
		Long: `compare reads two runs (run.json files or the report directories that hold
them) of the same scenario and prints, side by side: each assertion's figure,
bound and verdict; each stream's rate, p50, p90, p99, error rate and shed rate
per window; and the findings' detection, unroutable and recovery times and
restarts; each with its delta and, where a rule applies, a judgement.

Default rules (a regression is any of):
  p99 of a stream window worse by more than 20 % and more than 5ms
  error rate of a stream window up by more than 0.5 points
  a finding's time (recovery, detection, unroutable) worse by more than
    25 % and more than 1s, or "never" where the baseline had a time
  more restarts of a service than in the baseline
  an assertion that passed in the baseline and does not now
The scenario's compare: section (NEW's) overrides them, and flags override both.

Runs of different scenarios (by the scenario digest in run.json, else by
name) are refused unless --force.

Exit codes: 0 no regression, 1 regression, 2 bad input, 4 either run invalid
(not comparable).`,
		Args: exactArgs(2, "the baseline run and the new run"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "text" && f.output != "json" {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("invalid -o %q; known: json, text", f.output)}
			}
			basePath, base, err := loadRecord(args[0])
			if err != nil {
				return err
			}
			newPath, nr, err := loadRecord(args[1])
			if err != nil {
				return err
			}
			rep, err := compare.Runs(base, nr, compare.Options{Rules: f.rules.resolve(cmd, nr), Force: f.force, BasePath: basePath, NewPath: newPath})
			if err != nil {
				var nc *compare.NotComparableError
				if errors.As(err, &nc) {
					return err
				}
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			g.Logger.Info("compared runs", "base", base.RunID, "new", nr.RunID, "regressions", len(rep.Regressions))
			if f.output == "json" {
				err = compare.WriteJSON(g.Stdout, rep)
			} else {
				err = compare.WriteText(g.Stdout, rep)
			}
			if err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, err)
			}
			if rep.Regressed() {
				return exitcode.Wrap(exitcode.AssertionFailed, fmt.Errorf("regression: %s", rep.Regressions[0]))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&f.force, "force", false, "compare runs of different scenarios")
	f.rules.add(cmd)
	return cmd
}

// loadRecord reads a run record from path, a run.json file or a report
// directory holding one. Errors carry exit code 2 and name the file.
func loadRecord(path string) (string, *record.Run, error) {
	path, run, err := record.LoadPath(path)
	if err != nil {
		return path, nil, exitcode.Wrap(exitcode.BadInput, err)
	}
	return path, run, nil
}
