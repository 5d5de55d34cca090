package app

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/history"
	"github.com/drillhq/drill/internal/record"
)

// historyFlags are the flags of drill history.
type historyFlags struct {
	output         string
	last           int
	since          string
	baselineNights int
	scenario       string
	html           string
	force          bool
	rules          ruleFlags
}

// newHistoryCommand is `drill history DIR...`: figures across nights, a
// trend page, and the newest night judged against the median of the
// previous K.
func newHistoryCommand(g *Globals) *cobra.Command {
	var f historyFlags
	cmd := &cobra.Command{
		Use:   "history DIR|RUN.json...",
		Short: "Tabulate a scenario's figures across nights, draw a trend page and judge the newest night",
		Long: `history reads every run.json under the given directories (report
directories, or directories of them at any depth, as a CI system keeps nightly
artifacts) and run.json files, orders the runs by start time, and prints one
table per figure across nights: each assertion's figure and verdict, each
stream window's p50, p99, error rate and shed rate, and the findings'
detection, unroutable and recovery times and restarts. It writes an HTML
trend page (--html, default history.html under --out) with one plot per
figure, verdicts marked (green passed, red failed, grey not comparable) and
the baseline median dashed.

The newest run is judged against the median of the previous K comparable
nights (--baseline-nights, default 5) with the rules of drill compare (see
drill compare --help; the newest run's scenario compare: section, then the
flags). An assertion regresses when it passed on at least half of those
nights and does not now.

Exit codes: 0 no regression, 1 regression, 2 bad input (no runs, unreadable
run.json, runs of different scenarios without --scenario or --force), 4 the
newest run is invalid (not comparable).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%s takes at least 1 argument (directories of runs or run.json files), got 0", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			usage := func(err error) error { return &usageError{command: cmd.CommandPath(), err: err} }
			if f.output != "text" && f.output != "json" {
				return usage(fmt.Errorf("invalid -o %q; known: json, text", f.output))
			}
			if f.last < 0 || f.baselineNights < 1 {
				return usage(fmt.Errorf("--last must be at least 0 and --baseline-nights at least 1"))
			}
			opt := history.Options{Last: f.last, Scenario: f.scenario, Force: f.force,
				Unfinished: func(dir string) {
					fmt.Fprintf(g.Stderr, "history: %s holds a run that never finished writing its reports (%s only); it is not included: write them with drill report %s\n",
						dir, record.JournalFile, dir)
				}}
			if f.since != "" {
				t, err := parseSince(f.since)
				if err != nil {
					return usage(err)
				}
				opt.Since = t
			}
			nights, err := history.Load(args, opt)
			if err != nil {
				return err
			}
			newest := nights[len(nights)-1]
			var rules = f.rules.resolve(cmd, nil)
			if run, err := record.Load(newest.Path); err == nil {
				rules = f.rules.resolve(cmd, run)
			}
			if err := rules.Check(); err != nil {
				return usage(err)
			}
			j, err := history.Judge(nights, f.baselineNights, rules)
			if err != nil {
				return err
			}
			rep := history.Build(nights, j)
			page := f.html
			if page == "" {
				page = filepath.Join(g.Out, "history.html")
			}
			var buf bytes.Buffer
			if err := history.WriteHTML(&buf, rep); err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, err)
			}
			if err := os.MkdirAll(filepath.Dir(page), 0o755); err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("write history page: %w", err))
			}
			if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("write history page: %w", err))
			}
			if f.output == "json" {
				err = history.WriteJSON(g.Stdout, rep)
			} else {
				err = history.WriteText(g.Stdout, rep)
				if err == nil {
					_, err = fmt.Fprintf(g.Stdout, "trend page: %s\n", page)
				}
			}
			if err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, err)
			}
			if rep.ExitCode() != exitcode.OK {
				return exitcode.Wrap(rep.ExitCode(), fmt.Errorf("regression: %s", j.Regressions[0]))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.IntVar(&f.last, "last", 0, "keep only the newest N nights (0: all)")
	fl.StringVar(&f.since, "since", "", "keep only nights started at or after this date (2006-01-02 or RFC 3339)")
	fl.IntVar(&f.baselineNights, "baseline-nights", 5, "judge the newest night against the median of this many earlier comparable nights")
	fl.StringVar(&f.scenario, "scenario", "", "keep only runs of this scenario name")
	fl.StringVar(&f.html, "html", "", "write the trend page here (default history.html under --out)")
	fl.BoolVar(&f.force, "force", false, "accept runs of different scenarios")
	f.rules.add(cmd)
	return cmd
}

// parseSince reads --since as a date (UTC midnight) or an RFC 3339 time.
func parseSince(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q is neither a date (2006-01-02) nor an RFC 3339 time", s)
	}
	return t, nil
}
