// Package history reads a scenario's nightly runs (report directories or
// run.json files, as a CI system keeps them), tabulates each figure
// across nights, draws a trend page, and judges the newest run against
// the median of the nights before it (docs/DESIGN.md §14) with
// the rules of internal/compare.
//
// Runs are read through internal/record and summarised into a [Night],
// one record per CPU at a time; only the summaries are kept, so memory
// grows with the number of nights and figures, not with the size of
// run.json. A summary kept beside its run.json (run.summary.json, keyed
// by the run.json's SHA-256; see [WriteSummary]) is read instead of the
// record: a few kilobytes per night instead of every second's histograms.
package history

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/record"
)

// Sections of a figure.
const (
	SectionAssertion = "assertion"
	SectionStream    = "stream"
	SectionFinding   = "finding"
)

// Key names one figure across nights.
type Key struct {
	// Section is SectionAssertion, SectionStream or SectionFinding.
	Section string `json:"section"`
	// Subject is the assertion's name, the stream's name, or the finding's
	// kind and subject ("recovery orders after pg-pause").
	Subject string `json:"subject"`
	// Window is the assertion's or stream's window ("" for findings).
	Window string `json:"window,omitempty"`
	// Figure is "figure" for assertions, else p50, p99, error-rate,
	// shed-rate, recovery, length, restarts, ...
	Figure string `json:"figure"`
}

// String writes k as "subject window figure".
func (k Key) String() string {
	parts := []string{k.Subject}
	if k.Window != "" {
		parts = append(parts, k.Window)
	}
	return strings.Join(append(parts, k.Figure), " ")
}

// Point is one night's value of a figure: Value in Unit (-1: a time that
// never came), Text as printed, Verdict the assertion's verdict ("" for
// other figures).
type Point struct {
	Value   float64 `json:"value"`
	Unit    string  `json:"unit,omitempty"`
	Text    string  `json:"text"`
	Verdict string  `json:"verdict,omitempty"`
}

// Night is the summary of one run.
type Night struct {
	// Path is the run.json read.
	Path  string `json:"path"`
	RunID string `json:"runId"`
	// Scenario and Digest identify the scenario (Digest "" in older
	// records).
	Scenario string `json:"scenario"`
	Digest   string `json:"scenarioDigest,omitempty"`
	// StartedAt is the run's wall-clock start; nights are ordered by it.
	StartedAt time.Time `json:"startedAt"`
	// ExitCode is the code the record calls for ([record.Run.Decide]);
	// Comparable is false when the run is invalid, aborted or has an
	// assertion that could not be judged (see compare.Comparable), Why
	// then says why.
	ExitCode   int    `json:"exitCode"`
	Comparable bool   `json:"comparable"`
	Why        string `json:"why,omitempty"`
	// LatencyNotRecorded: the record was made before drill kept the
	// latency of successful requests, so the night has no latency figures
	// for the stream windows in which requests failed (compare never sets
	// a percentile over failed requests too beside one over successes).
	LatencyNotRecorded bool `json:"latencyNotRecorded,omitempty"`
	// Figures are the night's figures by key; Order their keys in the
	// run's order.
	Figures map[Key]Point `json:"-"`
	Order   []Key         `json:"-"`
	// Rules are the regression rules of the run's scenario (defaults with
	// its compare section).
	Rules compare.Rules `json:"-"`
}

// Summarise turns one loaded run into a [Night]: its assertions' figures
// and verdicts, each stream window's p50 and p99 of the successful
// requests (absent for a record made before they were recorded), error
// rate and shed rate, and its findings' figures (compare.FindingFigures).
func Summarise(path string, run *record.Run) Night {
	code, _ := run.Decide()
	n := Night{Path: path, RunID: run.RunID, Scenario: run.Name(), Digest: run.ScenarioDigest, StartedAt: run.StartedAt,
		ExitCode: code, Comparable: true, Figures: map[Key]Point{}, Rules: compare.DefaultRules()}
	if run.Scenario != nil {
		n.Rules = n.Rules.With(run.Scenario.Compare)
	}
	if err := compare.Comparable("night", path, run); err != nil {
		var nc *compare.NotComparableError
		n.Comparable = false
		n.Why = err.Error()
		if errors.As(err, &nc) {
			n.Why = nc.Why
		}
	}
	put := func(k Key, p Point) {
		if _, ok := n.Figures[k]; !ok {
			n.Order = append(n.Order, k)
		}
		n.Figures[k] = p
	}
	for _, r := range run.Results {
		put(Key{SectionAssertion, r.Name, r.Window, "figure"}, Point{Value: r.Figure.Value, Unit: r.Figure.Unit, Text: r.Figure.Text, Verdict: string(r.Verdict)})
	}
	for _, w := range compare.StreamWindows(run) {
		for _, f := range compare.StreamFigures(w) {
			if f.Missing != "" {
				// An older record's window with failures: its latency of
				// successful requests cannot be told; none succeeded: none.
				n.LatencyNotRecorded = n.LatencyNotRecorded || !w.Success.Recorded
				continue
			}
			switch f.Name {
			case compare.FigureOKP50, compare.FigureOKP99, "error-rate", "shed-rate":
				put(Key{SectionStream, w.Stream, w.Window, f.Name}, Point{Value: f.Value, Unit: f.Unit, Text: f.Text})
			}
		}
	}
	for _, f := range compare.FindingFigures(run) {
		put(Key{SectionFinding, f.Kind + " " + f.Subject, "", f.Figure}, Point{Value: f.Value, Unit: f.Unit, Text: f.Text})
	}
	return n
}

// Options select the nights of [Load].
type Options struct {
	// Last keeps the newest Last nights (0: all).
	Last int
	// Since drops nights started before it (zero: none dropped).
	Since time.Time
	// Scenario keeps only runs of this scenario name ("" : all; runs of
	// more than one scenario are then refused unless Force).
	Scenario string
	// Force accepts runs of different scenarios (by digest, else name).
	Force bool
	// WriteSummaries writes a summary file beside each run.json that had
	// none (or a stale one), for the next history to read (see [Load]);
	// without it Load writes nothing.
	WriteSummaries bool
	// Unfinished, when set, is called with each report directory that
	// holds a run's per-second journal but no run.json (a run killed
	// before it wrote its reports): such a night is not in the history
	// until `drill report DIR` writes its reports.
	Unfinished func(dir string)
}

// Load finds every run under paths (run.json files, report directories,
// or directories holding report directories at any depth; a re-judged
// copy of a run, with the same run id, counts once: the one nearest the
// top), summarises each, and returns the nights oldest first after
// applying opt. A run's summary is read from the summary file beside its
// run.json ([SummaryPath]) when that summarises exactly these run.json
// bytes (as [WriteSummary] writes it when run.json is written); otherwise
// the record is loaded and summarised, and with opt.WriteSummaries the
// summary file written for the next time. Errors carry exit code 2 and
// name the file or directory:
// a path that does not exist, a run.json that cannot be read, no run
// found, or runs of different scenarios without Force.
func Load(paths []string, opt Options) ([]Night, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: %w", err))
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() == "run.json" {
				found = append(found, path)
			}
			if !d.IsDir() && d.Name() == record.JournalFile && opt.Unfinished != nil {
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), "run.json")); errors.Is(err, fs.ErrNotExist) {
					opt.Unfinished(filepath.Dir(path))
				}
			}
			return nil
		})
		if err != nil {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: read %s: %w", p, err))
		}
		if len(found) == 0 {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: no run.json under %s", p))
		}
		// Shallowest first, so an original wins over its re-judged copies.
		sort.SliceStable(found, func(i, j int) bool {
			di, dj := strings.Count(found[i], string(filepath.Separator)), strings.Count(found[j], string(filepath.Separator))
			if di != dj {
				return di < dj
			}
			return found[i] < found[j]
		})
		files = append(files, found...)
	}
	all, err := readNights(files, opt.WriteSummaries)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: %w", err))
	}
	seen := map[string]bool{}
	var nights []Night
	for _, n := range all {
		if seen[n.RunID] {
			continue
		}
		seen[n.RunID] = true
		if opt.Scenario != "" && n.Scenario != opt.Scenario {
			continue
		}
		nights = append(nights, n)
	}
	if len(nights) == 0 {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: no run of scenario %q under %s", opt.Scenario, strings.Join(paths, ", ")))
	}
	sort.SliceStable(nights, func(i, j int) bool { return nights[i].StartedAt.Before(nights[j].StartedAt) })
	if !opt.Force {
		first := nights[0]
		for _, n := range nights[1:] {
			same := n.Scenario == first.Scenario
			if n.Digest != "" && first.Digest != "" {
				same = n.Digest == first.Digest
			}
			if !same {
				return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: %w: %s (%s) and %s (%s); pick one with --scenario NAME, or --force",
					compare.ErrDifferentScenario, first.Path, first.Scenario, n.Path, n.Scenario))
			}
		}
	}
	if !opt.Since.IsZero() {
		var kept []Night
		for _, n := range nights {
			if !n.StartedAt.Before(opt.Since) {
				kept = append(kept, n)
			}
		}
		nights = kept
	}
	if opt.Last > 0 && len(nights) > opt.Last {
		nights = nights[len(nights)-opt.Last:]
	}
	if len(nights) == 0 {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("history: no run under %s started since %s", strings.Join(paths, ", "), opt.Since.Format(time.RFC3339)))
	}
	return nights, nil
}

// Keys returns every figure's key across nights, in the newest night's
// order, then keys only older nights have.
func Keys(nights []Night) []Key {
	seen := map[Key]bool{}
	var out []Key
	for i := len(nights) - 1; i >= 0; i-- {
		for _, k := range nights[i].Order {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// Judgement is the newest night judged against the median of the nights
// before it.
type Judgement struct {
	// Newest is the judged night's run id; Baseline the run ids of the
	// nights whose median is the baseline (comparable ones only, at most
	// K, newest last).
	Newest   string   `json:"newest"`
	Baseline []string `json:"baseline"`
	// Rules are the rules applied (the newest run's scenario, then flags).
	Rules compare.Rules `json:"rules"`
	// Rows are the judged figures: Base the baseline's median, New the
	// newest night's value.
	Rows []compare.Row `json:"rows"`
	// Regressions lists every regression, one line each.
	Regressions []string `json:"regressions"`
	// Note says why nothing was judged (no earlier comparable night).
	Note string `json:"note,omitempty"`
}

// Regressed reports whether any figure regressed.
func (j *Judgement) Regressed() bool { return len(j.Regressions) > 0 }

// NotComparableError says the newest night's run is invalid; exit code 4.
type NotComparableError struct{ Path, Why string }

func (e *NotComparableError) Error() string {
	return fmt.Sprintf("not comparable: the newest run %s is invalid: %s", e.Path, e.Why)
}

// ExitCode is [exitcode.InvalidMeasurement].
func (e *NotComparableError) ExitCode() int { return exitcode.InvalidMeasurement }

// Judge compares the newest night with the median of the previous k
// comparable nights (k < 1 means 5) under rules. An assertion regresses
// when it passed in at least half of those nights and does not now. It
// returns a [*NotComparableError] when the newest night is not comparable.
func Judge(nights []Night, k int, rules compare.Rules) (*Judgement, error) {
	if k < 1 {
		k = 5
	}
	if len(nights) == 0 {
		return nil, errors.New("history: no nights to judge")
	}
	newest := nights[len(nights)-1]
	if !newest.Comparable {
		return nil, &NotComparableError{Path: newest.Path, Why: newest.Why}
	}
	j := &Judgement{Newest: newest.RunID, Rules: rules, Rows: []compare.Row{}, Regressions: []string{}, Baseline: []string{}}
	var base []Night
	for i := len(nights) - 2; i >= 0 && len(base) < k; i-- {
		if nights[i].Comparable {
			base = append([]Night{nights[i]}, base...)
		}
	}
	for _, b := range base {
		j.Baseline = append(j.Baseline, b.RunID)
	}
	if len(base) == 0 {
		j.Note = "no earlier comparable night: nothing to judge against"
		return j, nil
	}
	for _, key := range newest.Order {
		now := newest.Figures[key]
		var vals []float64
		passed := 0
		for _, b := range base {
			if p, ok := b.Figures[key]; ok {
				vals = append(vals, p.Value)
				if p.Verdict == string(assert.Pass) {
					passed++
				}
			}
		}
		if len(vals) == 0 {
			continue
		}
		med := median(vals)
		row := compare.Row{Subject: key.Subject, Window: key.Window, Figure: key.Figure, Unit: now.Unit,
			Base: &compare.Value{Value: med, Text: formatValue(now.Unit, med)}, New: &compare.Value{Value: now.Value, Text: now.Text}}
		if med >= 0 && now.Value >= 0 {
			compare.SetDelta(&row)
		}
		switch key.Section {
		case SectionStream:
			compare.JudgeStream(&row, rules)
		case SectionFinding:
			compare.JudgeFinding(&row, rules)
		case SectionAssertion:
			if rules.PassToFail {
				row.Rule, row.Judgement = compare.RulePassToFail, compare.OK
				if 2*passed >= len(vals) && now.Verdict != string(assert.Pass) {
					row.Judgement = compare.Regression
					row.Why = fmt.Sprintf("passed on %d of the previous %d nights, %s now (%s)", passed, len(vals), now.Verdict, now.Text)
				}
			}
		}
		j.Rows = append(j.Rows, row)
		if row.Judgement == compare.Regression {
			j.Regressions = append(j.Regressions, key.Section+" "+key.String()+": "+row.Why)
		}
	}
	return j, nil
}

// median returns the median of vs, a time that never came (-1) counting
// as longer than any; -1 when the median is one.
func median(vs []float64) float64 {
	s := make([]float64, len(vs))
	for i, v := range vs {
		if v < 0 {
			v = math.Inf(1)
		}
		s[i] = v
	}
	sort.Float64s(s)
	var m float64
	if n := len(s); n%2 == 1 {
		m = s[n/2]
	} else {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	if math.IsInf(m, 1) {
		return -1
	}
	return m
}

// formatValue writes a median in its unit as the run's figures are
// written.
func formatValue(unit string, v float64) string {
	if v < 0 && (unit == "s" || unit == "ms") {
		return "never"
	}
	switch unit {
	case "ms":
		return assert.FormatDuration(time.Duration(v * float64(time.Millisecond)))
	case "ratio":
		return assert.FormatPercent(v)
	case "s":
		return fmt.Sprintf("%.1f s", v)
	case "count", "replicas":
		return fmt.Sprintf("%g", v)
	}
	return assert.FormatValue(v)
}
