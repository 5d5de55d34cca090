package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/progress"
	"github.com/drillhq/drill/internal/runner"
)

// runFlags are the flags of drill run.
type runFlags struct {
	stateDir     string
	runID        string
	export       exportFlags
	pushRequired bool
	ui           uiFlags
	startMargin  time.Duration
}

func newRunCommand(g *Globals) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run the drill a scenario describes and judge it",
		Long: `Run validates the scenario, brings up what it needs (embedded Toxiproxy, a
throwaway PostgreSQL, the services under test as local replicas), drives the
load streams on one clock while faults turn on and off, removes every fault,
verifies that nothing of the run remains, judges the assertions, prints a
summary and writes run.json, junit.xml and report.html under --out.

The first Ctrl-C (or SIGTERM) stops load, reverts faults and writes the
reports (exit 3). A second one changes nothing of that: faults are still
reverted, processes stopped and the reports written. A third exits at once
without cleanup (run drill cleanup afterwards).

With --ui, drill serves a game-day console while the run lasts (its URL and
token on stderr): live plots and timeline, and controls to end, hold,
release or start (at: manual) a fault, stop load, abort and annotate, each
recorded in run.json and report.html.

A kubernetes scenario with load.workers drives its streams from that many
worker pods of one Indexed Job in the scenario's namespace (image
load.image): the Job is created before t=0, t=0 lies --start-margin
(default 30 s) after it, and the workers' merged seconds are judged as one
process's would be. A worker that fails, starts late or stops reporting
makes the run invalid (exit 4); the summary lists each worker.`,
		Args: exactArgs(1, "a scenario file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.export.check("push"); err != nil {
				return &usageError{command: cmd.CommandPath(), err: err}
			}
			sc, err := loadScenario(args[0])
			if err != nil {
				return err
			}
			out := ""
			if cmd.Flags().Changed("out") {
				out = g.Out
			}
			hard := g.Hard
			if hard == nil {
				hard = context.Background()
			}
			isTTY := false
			if f, ok := g.Stderr.(*os.File); ok {
				isTTY = progress.IsTerminal(f)
			}
			// The console binds before anything is touched: a console
			// that cannot listen is bad usage (exit 2).
			ui, err := f.ui.listen(g, sc)
			if err != nil {
				return err
			}
			res, err := runner.Run(cmd.Context(), runner.Options{
				Scenario:    sc,
				OutDir:      out,
				Kubeconfig:  g.Kubeconfig,
				Context:     g.Context,
				Namespace:   g.Namespace,
				StateDir:    f.stateDir,
				Stdout:      g.Stdout,
				Progress:    g.Stderr,
				ProgressTTY: isTTY,
				Hard:        hard,
				Logger:      g.Logger,
				RunID:       f.runID,
				Version:     g.Version,
				OnLive:      ui.attach(),
				OnLate:      g.onLate(),

				WorkersStartMargin: f.startMargin,
			})
			ui.finish(cmd.Context(), g, res, err)
			if res.Record != nil && (f.export.pushgateway != "" || f.export.metricsFile != "") {
				// The run's verdict and reports stand whatever the export
				// does; its failure is an exit code only with --push-required.
				if xerr := f.export.export(context.WithoutCancel(cmd.Context()), g, res.Record); xerr != nil {
					if f.pushRequired && err == nil {
						return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("exporting the run's metrics failed (--push-required): %w", xerr))
					}
					fmt.Fprintf(g.Stderr, "drill: exporting the run's metrics failed: %v\n", xerr)
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.stateDir, "state-dir", "", "directory for fault journals (default $XDG_STATE_HOME/drill)")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "run id carried by every toxic (default: UTC time and random bits)")
	f.export.add(cmd, "push")
	cmd.Flags().BoolVar(&f.pushRequired, "push-required", false, "exit 3 when the run passed but its metrics could not be pushed or written")
	cmd.Flags().DurationVar(&f.startMargin, "start-margin", runner.DefaultWorkersStartMargin, "load.workers: how long after the workers Job is created t=0 lies (time to schedule and start the pods)")
	f.ui.add(cmd)
	return cmd
}
