package runner

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/report"
)

// ReportOptions configure [Report] (drill report).
type ReportOptions struct {
	// Path is a run.json, or a run's report directory.
	Path string
	// Out receives the reports; "" = the directory of the run.json (Path
	// itself when it is a directory), or with Sets a new directory
	// rejudged-<UTC time> beside it, so the recorded run keeps its own
	// bounds and verdict.
	Out string
	// Sets override assertion fields before judging:
	// "<assertion>.<field>=<value>" (record.Run.Override).
	Sets []string
	// Stdout receives the summary and the "reports: DIR" line.
	Stdout io.Writer
	// Logger receives structured logs (stderr).
	Logger *slog.Logger
}

// Report re-judges a saved run (record.Open: a run.json, or a killed
// run's journal) with opts.Sets applied, writes its reports (run.json,
// junit.xml, report.html) into opts.Out and prints the summary. Its error
// carries the exit code: 2 for an unreadable record, a bad set or an Out
// that holds another run, 3 when the reports cannot be written or the
// summary printed, else the verdict's code with its reason (nil for 0).
func Report(opts ReportOptions) error {
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	out := opts.Out
	if out == "" {
		out = filepath.Dir(opts.Path)
		if st, err := os.Stat(opts.Path); err == nil && st.IsDir() {
			out = opts.Path
		}
		if len(opts.Sets) > 0 {
			out = filepath.Join(out, "rejudged-"+time.Now().UTC().Format("20060102T150405Z"))
		}
	}
	run, err := record.Open(opts.Path)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if run.Scenario == nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("load run record %s: it has no scenario to re-judge", opts.Path))
	}
	if err := run.Override(opts.Sets); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if err := record.CheckOutDir(out, run.RunID); err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	before := run.ExitCode
	code := run.Rejudge()
	opts.Logger.Info("re-judged run", "run", run.RunID, "exit_before", before, "exit_now", code, "overrides", len(opts.Sets))
	if err := report.WriteAll(out, run); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("write reports: %w", err))
	}
	if err := report.Summary(opts.Stdout, run); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("print summary: %w", err))
	}
	fmt.Fprintf(opts.Stdout, "reports: %s\n", out)
	if code == exitcode.OK {
		return nil
	}
	_, why := run.Decide()
	return exitcode.Wrap(code, errors.New(why))
}
