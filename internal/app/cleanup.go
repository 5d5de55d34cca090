package app

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/kube"
	"github.com/drillhq/drill/internal/workers"
)

// cleanupFlags are the flags of drill cleanup.
type cleanupFlags struct {
	run       string
	toxiproxy string
	stateDir  string
}

// newCleanupCommand builds `drill cleanup [--run ID] [--toxiproxy URL]`.
func newCleanupCommand(g *Globals) *cobra.Command {
	var fl cleanupFlags
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Undo what killed drill runs left behind (toxics, disabled proxies, paused processes and containers, throwaway PostgreSQL clusters, cgroups, compose containers and networks)",
		Long: `cleanup undoes every fault a drill run applied but never reverted, for
example because the run was killed with SIGKILL or its machine was lost.

It reads the run journals under the state directory ($XDG_STATE_HOME/drill,
else ~/.local/state/drill): each fault is written there before it is applied.
Journaled toxics are removed, disabled proxies re-enabled, paused process
groups continued, paused containers unpaused and the cgroup a run made
for its system under test removed. The containers and network of a
compose run (labelled dev.drill.run=<run>) are removed, and a run's load
workers Job (with its pods and spec Secret) is deleted in the cluster its
journal names. A throwaway PostgreSQL the run started
(binaries mode) has its processes continued and killed and its temp dir
($TMPDIR/drill-pg-*) removed; each line says what was done. With
--toxiproxy it also
removes every toxic named drill-* (or drill-<run>-* with --run) from that
Toxiproxy, journal or not.

Exit code 0 when everything was undone, 5 when something could not be.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCleanup(cmd, g, fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.run, "run", "", "clean up one run only (its id, as drill run printed it)")
	f.StringVar(&fl.toxiproxy, "toxiproxy", "", "Toxiproxy API URL to sweep for drill-* toxics (e.g. http://toxiproxy:8474)")
	f.StringVar(&fl.stateDir, "state-dir", "", "directory holding the run journals (default $XDG_STATE_HOME/drill or ~/.local/state/drill)")
	return cmd
}

func runCleanup(cmd *cobra.Command, g *Globals, fl cleanupFlags) error {
	if fl.run != "" {
		if err := inject.ValidRunID(fl.run); err != nil {
			return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--run: %w", err)}
		}
	}
	stateDir := fl.stateDir
	if stateDir == "" {
		d, err := inject.DefaultStateDir(g.Getenv)
		if err != nil {
			return &usageError{command: cmd.CommandPath(), err: err}
		}
		stateDir = d
	}
	if fi, err := os.Stat(stateDir); err == nil && !fi.IsDir() {
		return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--state-dir %s is a file, not a directory", stateDir)}
	}
	if fl.run != "" && fl.toxiproxy == "" {
		if _, err := os.Stat(inject.JournalPath(stateDir, fl.run)); err != nil {
			fmt.Fprintf(g.Stderr, "drill: no journal of run %s under %s; nothing recorded to undo (pass --toxiproxy URL to sweep a Toxiproxy for its toxics)\n", fl.run, stateDir)
		}
	}
	opts := inject.CleanupOptions{StateDir: stateDir, RunID: fl.run, Log: g.Logger}
	if fl.toxiproxy != "" {
		opts.Toxiproxy = inject.NewRemote(fl.toxiproxy)
	}
	rep, err := inject.Cleanup(cmd.Context(), opts)
	// Load workers' Jobs the journal names, deleted in their clusters.
	jobs, jerr := workers.Cleanup(cmd.Context(), stateDir, fl.run, workerClient)
	err = errors.Join(err, jerr)
	if werr := printCleanupReport(g.Stdout, rep, jobs, err != nil); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return exitcode.Wrap(exitcode.CleanupUnverified, fmt.Errorf("clean up: %w", err))
	}
	return nil
}

// printCleanupReport lists what was undone (jobs: the load workers' Jobs
// deleted); "nothing to clean up" only when nothing was found and nothing
// failed (failed: the sweep had an error).
func printCleanupReport(w io.Writer, rep inject.CleanupReport, jobs []string, failed bool) error {
	var err error
	p := func(format string, a ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, a...)
		}
	}
	for _, l := range rep.Removed {
		p("removed  %s (run %s)\n", l, orUnknown(l.RunID))
	}
	for _, l := range rep.Gone {
		p("gone     %s (run %s)\n", l, orUnknown(l.RunID))
	}
	for _, l := range rep.Failed {
		p("FAILED   %s (run %s)\n", l, orUnknown(l.RunID))
	}
	for _, j := range jobs {
		p("removed  load workers %s\n", j)
	}
	if len(rep.Removed)+len(rep.Gone)+len(rep.Failed)+len(jobs) == 0 && !failed {
		p("nothing to clean up\n")
	}
	return err
}

// workerClient connects to the cluster a workers journal entry names.
func workerClient(kubeconfig, kubeContext string) (kubernetes.Interface, error) {
	cfg, err := kube.Load(kubeconfig, kubeContext, "")
	if err != nil {
		return nil, err
	}
	return cfg.Clientset()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
