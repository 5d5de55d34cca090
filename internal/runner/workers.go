package runner

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/kube"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/report"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
)

// DefaultWorkersStartMargin is how long after the workers Job is created
// the run's t=0 lies: time for the pods to be scheduled, their image
// pulled and the workers started.
const DefaultWorkersStartMargin = 30 * time.Second

// WorkersOptions configure load spread over worker pods (a scenario with
// load.workers).
type WorkersOptions struct {
	// Kubeconfig, Context and Namespace follow kubectl's conventions; the
	// scenario's allow-list applies.
	Kubeconfig, Context, Namespace string
	// StateDir holds the workers Job journal (drill cleanup reads it);
	// "" records none.
	StateDir string
	// StartMargin: see DefaultWorkersStartMargin.
	StartMargin time.Duration
	// MaxStartLate: a worker ready later than this after its first
	// stream's start makes the run invalid; default
	// workers.DefaultMaxStartLate.
	MaxStartLate time.Duration
	// Client and Logs, when set, replace the kubeconfig's cluster (tests).
	Client kubernetes.Interface
	Logs   workers.LogStreamer
}

// seriesSink gathers merged seconds into series.
type seriesSink struct{ sb measure.SeriesBuilder }

func (s *seriesSink) WriteSecond(stream string, b *measure.Bucket) error {
	s.sb.Add(stream, b)
	return nil
}

// runWorkersLoad drives sc's streams on sc.Load.Workers worker pods of one
// Indexed Job, merges their seconds, prints the same summary as one
// process plus a line per worker, and judges the merged series by the lag
// rule. Errors carry the exit code: 2 a context or namespace the scenario
// does not allow, 3 the cluster could not be reached or the Job created,
// 4 a worker failed or the merged load fell behind its schedule.
func runWorkersLoad(ctx context.Context, opts LoadOptions, sc *scenario.Scenario, runID string, streams []scenario.Stream) error {
	wo := opts.Workers
	ns, kctx, cs := wo.Namespace, wo.Context, wo.Client
	if ns == "" && sc.Environment.Kubernetes != nil {
		ns = sc.Environment.Kubernetes.Namespace
	}
	if cs == nil {
		cfg, err := kube.Load(wo.Kubeconfig, wo.Context, ns)
		if err != nil {
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("kubeconfig: %w", err))
		}
		if err := kube.CheckAllowed(sc.Environment.Kubernetes, cfg.Context, cfg.Namespace); err != nil {
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w", sc.File, err))
		}
		if cs, err = cfg.Clientset(); err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("connect to context %s: %w", cfg.Context, err))
		}
		ns, kctx = cfg.Namespace, cfg.Context
	}
	margin := wo.StartMargin
	if margin <= 0 {
		margin = DefaultWorkersStartMargin
	}
	spec := workers.Spec{RunID: runID, Workers: sc.Load.Workers, Start: time.Now().Add(margin).UTC(), Streams: streams}
	var journal *workers.Journal
	if wo.StateDir != "" {
		var err error
		if journal, err = workers.OpenJournal(wo.StateDir, runID, wo.Kubeconfig, kctx); err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, err)
		}
	}
	sink := &seriesSink{}
	coord := &workers.Coordinator{
		Client:  cs,
		Job:     workers.JobOptions{Namespace: ns, Image: sc.Load.Image, Spec: spec},
		Sink:    sink,
		Logs:    wo.Logs,
		Journal: journal,
		Log:     opts.Logger.With("component", "workers"),

		MaxStartLate: wo.MaxStartLate,
	}
	opts.Logger.Info("load spread over workers", "workers", spec.Workers, "namespace", ns, "t0", spec.Start)
	res, runErr := coord.Run(ctx)
	series := sink.sb.Series()
	// The tables are for a person; a failed write does not change the
	// measurement's verdict.
	_ = report.LoadSummary(opts.Stdout, streams, series)
	_ = report.LoadWorkerLines(opts.Stdout, res)
	if opts.Save != "" {
		if err := saveSeries(opts.Save, series); err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, err)
		}
	}
	if runErr != nil {
		if exitcode.Code(runErr) == exitcode.InvalidMeasurement {
			return fmt.Errorf("drill load: measurement invalid: %w", runErr)
		}
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill load: %w", runErr))
	}
	total := max(spec.Duration()+time.Second, seriesEnd(series))
	v := record.Validity{
		LoadBehind:       record.CheckLag(&scenario.Scenario{Streams: streams}, series, 0, total),
		ConnectionErrors: record.CheckConnectionErrors(&scenario.Scenario{Streams: streams}, series, 0, total),
		Problems:         record.CheckGenerator(series, 0, total, 0),
	}
	if !v.Valid() {
		return exitcode.Wrap(exitcode.InvalidMeasurement, fmt.Errorf("drill load: measurement invalid: %s", v.Summary()))
	}
	return nil
}
