package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/export"
	"github.com/drillhq/drill/internal/record"
)

// exportFlags are the metric-export flags of drill export and drill run.
type exportFlags struct {
	pushgateway string
	metricsFile string
	environment string
}

// add declares the flags on cmd; pushName is the Pushgateway flag's name.
func (f *exportFlags) add(cmd *cobra.Command, pushName string) {
	cmd.Flags().StringVar(&f.pushgateway, pushName, "", "push the run's figures to this Prometheus Pushgateway URL (group job=drill, scenario, environment)")
	cmd.Flags().StringVar(&f.metricsFile, "metrics-file", "", "write the run's figures to this file in the OpenMetrics text format (node_exporter's textfile collector)")
	cmd.Flags().StringVar(&f.environment, "environment", "", "environment label of the exported metrics (default: the run's environment type)")
}

// check refuses a Pushgateway URL that is not http(s) with a host.
func (f *exportFlags) check(flag string) error {
	if f.pushgateway == "" {
		return nil
	}
	u, err := url.Parse(f.pushgateway)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--%s %q is not an http(s) URL with a host", flag, f.pushgateway)
	}
	return nil
}

// export pushes and/or writes run's metrics; it returns every failure,
// each naming the URL or file.
func (f *exportFlags) export(ctx context.Context, g *Globals, run *record.Run) error {
	grp := export.GroupingFor(run, f.environment)
	var errs []error
	if f.pushgateway != "" {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := export.Push(pctx, f.pushgateway, nil, run, grp)
		cancel()
		if err != nil {
			errs = append(errs, err)
		} else {
			g.Logger.Info("pushed run metrics", "url", f.pushgateway, "scenario", grp.Scenario, "environment", grp.Environment)
		}
	}
	if f.metricsFile != "" {
		if err := export.WriteOpenMetrics(f.metricsFile, run, grp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newExportCommand is `drill export RUN.json --pushgateway URL
// [--metrics-file FILE]`.
func newExportCommand(g *Globals) *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export RUN.json",
		Short: "Push a run's figures to a Prometheus Pushgateway or write them as OpenMetrics",
		Long: `export reads a run.json (or the report directory holding it) and pushes its
figures to a Prometheus Pushgateway (--pushgateway URL; the group job="drill",
scenario, environment is replaced) and/or writes them to a file in the
OpenMetrics text format (--metrics-file FILE) for node_exporter's textfile
collector. Metrics: drill_run_exit_code, drill_run_valid,
drill_run_start_timestamp_seconds, drill_assertion_passed and
drill_assertion_figure{assertion,window,type,unit},
drill_stream_latency_seconds{stream,window,quantile},
drill_stream_requests_per_second, drill_stream_error_ratio and
drill_stream_shed_ratio{stream,window}, drill_finding_seconds and
drill_finding_count{finding,subject,figure}.

Exit codes: 0 exported, 2 bad input (unreadable run, bad URL, neither flag),
3 the Pushgateway could not be reached or the file written.`,
		Args: exactArgs(1, "the run.json to export"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.pushgateway == "" && f.metricsFile == "" {
				return &usageError{command: cmd.CommandPath(), err: errors.New("give --pushgateway URL, --metrics-file FILE or both")}
			}
			if err := f.check("pushgateway"); err != nil {
				return &usageError{command: cmd.CommandPath(), err: err}
			}
			_, run, err := loadRecord(args[0])
			if err != nil {
				return err
			}
			if err := f.export(cmd.Context(), g, run); err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, err)
			}
			return nil
		},
	}
	f.add(cmd, "pushgateway")
	return cmd
}
