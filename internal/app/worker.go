package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/workers"
)

// workerFlags are the flags of `drill worker`.
type workerFlags struct {
	index    int
	specFile string
}

// newWorkerCommand is `drill worker`: one load worker of a run whose load
// is spread over a Kubernetes Indexed Job (internal/workers).
func newWorkerCommand(g *Globals) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker [--index N] [--spec-file FILE]",
		Short: "Run one load worker's share of a drill's streams (a pod of the run's Indexed Job)",
		Long: `worker runs one load worker of a drill whose load is spread over N workers
(load.workers): drill run creates them as a Kubernetes Indexed Job, and each
pod runs this command.

The spec (the run id, N, the run's t=0 as an absolute time, and the
streams) comes from $` + workers.EnvSpec + ` (JSON) or --spec-file; the worker's
index i from $` + workers.EnvIndex + `, which Kubernetes sets in every pod of an
Indexed Job, or --index. Worker i sends, of every stream's schedule, the
requests whose sequence number is i mod N, each at its time from t=0;
latency counts from that intended time.

Output on stdout is JSON lines in the format of the seconds journal: each
closed second of each stream ({"kind":"second",...}) and the worker's own
lines ({"kind":"worker","data":{"event":"ready"|"alive"|"done",...}}): ready
says how late after t=0 it started, alive comes once a second, done carries
its totals. drill follows the pods' logs and merges the seconds.

Exit code 0 when the schedule ran (behind schedule or not: the merged
seconds are judged), 2 for a bad spec or index, 3 when it could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runWorker(cmd, g, f) },
	}
	fs := cmd.Flags()
	fs.IntVar(&f.index, "index", -1, "this worker's index (default $"+workers.EnvIndex+")")
	fs.StringVar(&f.specFile, "spec-file", "", "read the worker spec from FILE instead of $"+workers.EnvSpec)
	return cmd
}

func runWorker(cmd *cobra.Command, g *Globals, f workerFlags) error {
	bad := func(err error) error {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill worker: %w", err))
	}
	data := g.Getenv(workers.EnvSpec)
	if f.specFile != "" {
		b, err := os.ReadFile(f.specFile)
		if err != nil {
			return bad(fmt.Errorf("--spec-file: %w", err))
		}
		data = string(b)
	}
	spec, err := workers.DecodeSpec(data)
	if err != nil {
		return bad(err)
	}
	idx := f.index
	if idx < 0 {
		if idx, err = workers.ParseIndex(g.Getenv(workers.EnvIndex), spec.Workers); err != nil {
			return bad(err)
		}
	} else if idx >= spec.Workers {
		return bad(fmt.Errorf("--index %d must be within 0..%d", idx, spec.Workers-1))
	}
	log := g.Logger.With("worker", idx)
	reading := measureClock(cmd.Context(), g.Getenv, spec.Start.Add(spec.FirstStart()))
	log.Info("clock against the API server", "offset", reading.String())
	if err := workers.RunWorker(cmd.Context(), spec, idx, g.Stdout, reading, log); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill worker: %w", err))
	}
	return nil
}

// clockMargin is the time a worker keeps between the end of its clock
// check and its first stream's start.
const clockMargin = 500 * time.Millisecond

// measureClock measures the worker's clock against the API server's
// ($KUBERNETES_SERVICE_HOST and _PORT) if there is time before first, the
// first stream's start; otherwise the reading says why it was not measured.
func measureClock(ctx context.Context, getenv func(string) string, first time.Time) *workers.ClockReading {
	url := workers.APIServerURL(getenv)
	if url == "" {
		return &workers.ClockReading{Error: "no API server in $" + workers.EnvAPIHost}
	}
	budget := time.Until(first) - clockMargin
	if budget < time.Second {
		return &workers.ClockReading{Against: url, Error: "started too close to t=0"}
	}
	r, err := workers.MeasureClock(ctx, workers.APIServerClient(), url, min(budget, 3*time.Second))
	if err != nil {
		r.Error = err.Error()
	}
	return &r
}
