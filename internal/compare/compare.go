// Package compare sets a run beside a baseline run of the same scenario
// (docs/DESIGN.md §14): per assertion its figure, bound and
// verdict; per stream and window its rate, the p50, p90 and p99 of its
// successful requests, error rate and shed rate; per finding its times and counts (detection, unroutable
// time, recovery, restarts). Each figure gets its delta and, where a rule
// applies, a regression judgement ([Rules]).
//
// [Runs] is pure: it reads two loaded run records and uses no clock and
// no I/O. Runs are read through internal/record only.
package compare

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
)

// Judgements of a compared figure.
const (
	// Regression: a rule says the new figure is worse than the baseline's.
	Regression = "regression"
	// OK: a rule applies and the new figure is within its margins.
	OK = "ok"
	// NotJudged: no rule applies to this figure (shown for context), or one
	// side lacks it.
	NotJudged = ""
)

// RunInfo names one side of a comparison.
type RunInfo struct {
	// Path is the file the run was read from ("" when compared in memory).
	Path  string `json:"path,omitempty"`
	RunID string `json:"runId"`
	// Scenario is the scenario's name; Digest its scenario digest ("" in
	// records written before digests).
	Scenario string `json:"scenario"`
	Digest   string `json:"scenarioDigest,omitempty"`
	// StartedAt is the run's wall-clock start (display only).
	StartedAt time.Time `json:"startedAt"`
	// ExitCode is the code the run's record calls for now.
	ExitCode int `json:"exitCode"`
}

// Value is one side of a compared figure: Value in the row's Unit
// ("ms", "ratio", "req/s", "s", "count"; -1 for a time that never came),
// Text as printed. Missing says why a run has no such figure although the
// row applies to it ("not recorded": a record made before drill kept the
// latency of successful requests; "none succeeded"); Value is then 0 and
// the row gets no delta and no judgement.
type Value struct {
	Value   float64 `json:"value"`
	Text    string  `json:"text"`
	Missing string  `json:"missing,omitempty"`
}

// Row is one compared figure.
type Row struct {
	// Subject is what the figure is about: the assertion's name, the
	// stream's name, or the finding's kind and service, fault or stream
	// (e.g. "recovery card-auth after tax-brownout").
	Subject string `json:"subject"`
	// Window is the window the figure covers (assertions and streams).
	Window string `json:"window,omitempty"`
	// Figure names the figure: "figure" for an assertion's measured
	// figure, else p50, p99, error-rate, recovery, ...
	Figure string `json:"figure"`
	Unit   string `json:"unit,omitempty"`
	// Base and New are the two sides; nil when that run lacks the figure.
	Base *Value `json:"base"`
	New  *Value `json:"new"`
	// Delta is New-Base in Unit (nil when either side is missing or a
	// time never came); DeltaText as printed.
	Delta     *float64 `json:"delta,omitempty"`
	DeltaText string   `json:"deltaText,omitempty"`
	// Judgement is [Regression], [OK] or [NotJudged]; Rule names the rule
	// that judged (RuleP99, ...); Why says why in words when it is a
	// regression.
	Judgement string `json:"judgement,omitempty"`
	Rule      string `json:"rule,omitempty"`
	Why       string `json:"why,omitempty"`
}

// AssertionRow compares one assertion by name.
type AssertionRow struct {
	Row
	// Type is the assertion's type.
	Type string `json:"type"`
	// BaseVerdict and NewVerdict are the verdicts ("" when the run lacks
	// the assertion); BaseBound and NewBound the bounds as text.
	BaseVerdict string `json:"baseVerdict,omitempty"`
	NewVerdict  string `json:"newVerdict,omitempty"`
	BaseBound   string `json:"baseBound,omitempty"`
	NewBound    string `json:"newBound,omitempty"`
}

// Report is the comparison of a new run with its baseline.
type Report struct {
	Base RunInfo `json:"base"`
	New  RunInfo `json:"new"`
	// Forced is true when runs of different scenarios were compared with
	// --force.
	Forced bool `json:"forced,omitempty"`
	// Rules are the rules applied.
	Rules Rules `json:"rules"`
	// Assertions, Streams and Findings are the compared figures, in the
	// new run's order (figures only the baseline has come last).
	Assertions []AssertionRow `json:"assertions"`
	Streams    []Row          `json:"streams"`
	Findings   []Row          `json:"findings"`
	// Regressions lists every row judged a regression, one line each.
	Regressions []string `json:"regressions"`
}

// Regressed reports whether any figure was judged a regression.
func (r *Report) Regressed() bool { return len(r.Regressions) > 0 }

// ExitCode is [exitcode.AssertionFailed] when the new run regressed, else
// [exitcode.OK].
func (r *Report) ExitCode() int {
	if r.Regressed() {
		return exitcode.AssertionFailed
	}
	return exitcode.OK
}

// ErrDifferentScenario is wrapped by [Runs] when the runs are of different
// scenarios and Force is not set.
var ErrDifferentScenario = errors.New("runs of different scenarios")

// NotComparableError says a run's measurement cannot be trusted, so no
// comparison can be made; its exit code is 4.
type NotComparableError struct {
	// Which is "base" or "new"; Path the run's file; Why the run's reason.
	Which, Path, Why string
}

func (e *NotComparableError) Error() string {
	name := e.Which + " run"
	if e.Path != "" {
		name += " " + e.Path
	}
	return fmt.Sprintf("not comparable: %s is invalid: %s", name, e.Why)
}

// ExitCode is [exitcode.InvalidMeasurement].
func (e *NotComparableError) ExitCode() int { return exitcode.InvalidMeasurement }

// Options tune [Runs].
type Options struct {
	// Rules judge the figures (see [DefaultRules], [Rules.With]).
	Rules Rules
	// Force compares runs of different scenarios.
	Force bool
	// BasePath and NewPath name the runs' files in the report and errors.
	BasePath, NewPath string
}

// Comparable returns a [*NotComparableError] when run's measurement is
// invalid, it was aborted, or an assertion could not be judged or had its
// window cut short; nil otherwise.
func Comparable(which, path string, run *record.Run) error {
	if !run.Validity.Valid() {
		return &NotComparableError{Which: which, Path: path, Why: "the measurement is invalid: " + run.Validity.Summary()}
	}
	if run.Aborted != "" {
		return &NotComparableError{Which: which, Path: path, Why: "the run could not be carried out: " + run.Aborted}
	}
	for _, res := range run.Results {
		if res.Verdict == assert.Error || res.Verdict == assert.Aborted {
			return &NotComparableError{Which: which, Path: path, Why: "assertion " + res.Name + " " + string(res.Verdict) + ": " + res.Message}
		}
	}
	return nil
}

// SameScenario returns nil when base and new are runs of one scenario: by
// digest when both records carry one, else by scenario name. Otherwise it
// returns an error wrapping [ErrDifferentScenario] that says what differs.
func SameScenario(base, new *record.Run) error {
	if base.ScenarioDigest != "" && new.ScenarioDigest != "" {
		if base.ScenarioDigest != new.ScenarioDigest {
			return fmt.Errorf("%w: scenario %q (digest %s) and %q (digest %s) differ in what the drill does (load, faults, timeline or system); use --force to compare them anyway",
				ErrDifferentScenario, base.Name(), short(base.ScenarioDigest), new.Name(), short(new.ScenarioDigest))
		}
		return nil
	}
	if base.Name() != new.Name() {
		return fmt.Errorf("%w: scenario %q and %q; use --force to compare them anyway", ErrDifferentScenario, base.Name(), new.Name())
	}
	return nil
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// Runs compares new with base. It returns an error wrapping
// [ErrDifferentScenario] when they are runs of different scenarios and
// opt.Force is false, a [*NotComparableError] when either is invalid (see
// [Comparable]), or an error when opt.Rules are out of range.
func Runs(base, new *record.Run, opt Options) (*Report, error) {
	if err := opt.Rules.Check(); err != nil {
		return nil, fmt.Errorf("compare rules: %w", err)
	}
	same := SameScenario(base, new)
	if same != nil && !opt.Force {
		return nil, same
	}
	if err := Comparable("base", opt.BasePath, base); err != nil {
		return nil, err
	}
	if err := Comparable("new", opt.NewPath, new); err != nil {
		return nil, err
	}
	rep := &Report{Base: info(base, opt.BasePath), New: info(new, opt.NewPath), Forced: same != nil, Rules: opt.Rules,
		Assertions: []AssertionRow{}, Streams: []Row{}, Findings: []Row{}, Regressions: []string{}}
	rep.Assertions = assertionRows(base, new, opt.Rules)
	rep.Streams = streamRows(base, new, opt.Rules)
	rep.Findings = findingRows(base, new, opt.Rules)
	for _, a := range rep.Assertions {
		if a.Judgement == Regression {
			rep.Regressions = append(rep.Regressions, "assertion "+a.Subject+": "+a.Why)
		}
	}
	for _, s := range rep.Streams {
		if s.Judgement == Regression {
			rep.Regressions = append(rep.Regressions, "stream "+s.Subject+" "+s.Window+" "+s.Figure+": "+s.Why)
		}
	}
	for _, f := range rep.Findings {
		if f.Judgement == Regression {
			rep.Regressions = append(rep.Regressions, f.Subject+" "+f.Figure+": "+f.Why)
		}
	}
	return rep, nil
}

func info(r *record.Run, path string) RunInfo {
	code, _ := r.Decide()
	return RunInfo{Path: path, RunID: r.RunID, Scenario: r.Name(), Digest: r.ScenarioDigest, StartedAt: r.StartedAt, ExitCode: code}
}

// assertionRows pairs the assertions by name.
func assertionRows(base, new *record.Run, rules Rules) []AssertionRow {
	byName := map[string]assert.Result{}
	for _, r := range base.Results {
		byName[r.Name] = r
	}
	seen := map[string]bool{}
	var rows []AssertionRow
	for _, n := range new.Results {
		seen[n.Name] = true
		row := AssertionRow{Row: Row{Subject: n.Name, Window: n.Window, Figure: "figure", Unit: n.Figure.Unit,
			New: &Value{Value: n.Figure.Value, Text: n.Figure.Text}}, Type: string(n.Type), NewVerdict: string(n.Verdict), NewBound: n.Bound}
		b, ok := byName[n.Name]
		if ok {
			row.Base = &Value{Value: b.Figure.Value, Text: b.Figure.Text}
			row.BaseVerdict, row.BaseBound = string(b.Verdict), b.Bound
			if b.Figure.Unit == n.Figure.Unit {
				d := n.Figure.Value - b.Figure.Value
				row.Delta, row.DeltaText = &d, assertionDelta(n.Figure.Unit, b.Figure.Value, n.Figure.Value)
			}
			if rules.PassToFail {
				row.Rule, row.Judgement = RulePassToFail, OK
				if b.Verdict == assert.Pass && n.Verdict != assert.Pass {
					row.Judgement = Regression
					row.Why = fmt.Sprintf("passed in the baseline (%s, bound %s), %s now (%s, bound %s)", b.Figure.Text, b.Bound, n.Verdict, n.Figure.Text, n.Bound)
				}
			}
		}
		rows = append(rows, row)
	}
	for _, b := range base.Results {
		if seen[b.Name] {
			continue
		}
		rows = append(rows, AssertionRow{Row: Row{Subject: b.Name, Window: b.Window, Figure: "figure", Unit: b.Figure.Unit,
			Base: &Value{Value: b.Figure.Value, Text: b.Figure.Text}}, Type: string(b.Type), BaseVerdict: string(b.Verdict), BaseBound: b.Bound})
	}
	if rows == nil {
		rows = []AssertionRow{}
	}
	return rows
}

// WindowStats are a stream's figures over one window.
type WindowStats struct {
	Stream, Window string
	// Stats are over every completed request, failed ones included.
	Stats assert.StreamStats
	// Success is the latency of the successful requests alone.
	Success SuccessLatency
}

// SuccessLatency is the latency of a stream window's successful requests
// (status 200-399), from their intended send times.
type SuccessLatency struct {
	// Recorded is false when a second of the window cannot tell it: one of
	// a record made before drill kept it, in which some requests failed
	// ([measure.Bucket.SuccessLatency]).
	Recorded bool
	// Count is the number of successful requests; P50, P90 and P99 their
	// percentiles (0 when Count is 0).
	Count         int64
	P50, P90, P99 time.Duration
}

// successOf reads the latency of the successful requests of the seconds
// of s that lie wholly inside [from, to) (the seconds [measure.Series.Window]
// merges), second by second, so an older record's seconds without
// failures count (their latency is their successes') and one with
// failures leaves the window not recorded.
func successOf(s *measure.Series, from, to time.Duration) SuccessLatency {
	acc := measure.NewBucket(from, to-from)
	for _, b := range s.Buckets {
		if !b.Within(from, to) {
			continue
		}
		h, ok := b.SuccessLatency()
		if !ok {
			return SuccessLatency{}
		}
		acc.Merge(&measure.Bucket{OK: b.OK, Success: h})
	}
	out := SuccessLatency{Recorded: true, Count: acc.OK}
	if out.Count > 0 {
		out.P50, out.P90, out.P99 = measure.Quantile(acc.Success, 50), measure.Quantile(acc.Success, 90), measure.Quantile(acc.Success, 99)
	}
	return out
}

// StreamWindows summarises each stream of run over each plan window (run
// first, then the plan's order), over the time load actually ran,
// skipping windows where the stream sent nothing; streams sorted by name.
func StreamWindows(run *record.Run) []WindowStats {
	series := seriesOf(run)
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	var wins []plan.Window
	if run.Plan != nil {
		wins = append(wins, run.Plan.Windows...)
		sort.SliceStable(wins, func(i, j int) bool { return wins[i].Name == "run" && wins[j].Name != "run" })
	}
	stop, stopped := loadEnd(run)
	var out []WindowStats
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		for _, w := range wins {
			end := w.End
			if stopped && stop < end {
				end = stop
			}
			if end <= w.Start {
				continue
			}
			b := s.Window(w.Start, end)
			if b.Requests == 0 && b.Intended == 0 {
				continue
			}
			out = append(out, WindowStats{Stream: n, Window: w.Name, Stats: assert.Stats(b), Success: successOf(s, w.Start, end)})
		}
	}
	return out
}

// seriesOf is the one place this package reads a run's per-second series.
func seriesOf(run *record.Run) map[string]*measure.Series { return run.Series }

// loadEnd is when load stopped (the run's "load-end" phase event).
func loadEnd(run *record.Run) (time.Duration, bool) {
	for i := len(run.Events) - 1; i >= 0; i-- {
		e := run.Events[i]
		if e.Kind == event.PhaseStart && e.Detail == assert.LoadEndDetail {
			return e.At, true
		}
	}
	return 0, false
}

// Names of the latency figures of a stream window: percentiles of the
// successful requests alone. A percentile over failed requests too would
// move with the error rate (a run whose failures are fast 503s would look
// faster), so compare never sets one run's beside another's; the error
// rate is its own figure.
const (
	FigureOKP50 = "ok-p50"
	FigureOKP90 = "ok-p90"
	FigureOKP99 = "ok-p99"
)

// StreamFigures lists the figures of a stream window in table order:
// rate, the p50, p90 and p99 of the successful requests' latency
// ([FigureOKP50], ...; Missing "not recorded" or "none succeeded" where a
// run has none), error rate and shed rate.
func StreamFigures(w WindowStats) []Figure {
	s := w.Stats
	shed := 0.0
	if s.Requests > 0 {
		shed = float64(s.Shed) / float64(s.Requests)
	}
	lat := func(name string, d time.Duration) Figure {
		switch {
		case !w.Success.Recorded:
			return Figure{Name: name, Unit: "ms", Text: "not recorded", Missing: "not recorded"}
		case w.Success.Count == 0:
			return Figure{Name: name, Unit: "ms", Text: "none succeeded", Missing: "none succeeded"}
		}
		return Figure{Name: name, Unit: "ms", Value: ms(d), Text: assert.FormatDuration(d)}
	}
	return []Figure{
		{Name: "rate", Unit: "req/s", Value: s.Rate, Text: fmt.Sprintf("%.1f/s", s.Rate)},
		lat(FigureOKP50, w.Success.P50),
		lat(FigureOKP90, w.Success.P90),
		lat(FigureOKP99, w.Success.P99),
		{Name: "error-rate", Unit: "ratio", Value: s.ErrorRate, Text: assert.FormatPercent(s.ErrorRate)},
		{Name: "shed-rate", Unit: "ratio", Value: shed, Text: assert.FormatPercent(shed)},
	}
}

// Figure is one named figure with its unit, value and text; Missing says
// why a run lacks it (see [Value]).
type Figure struct {
	Name, Unit string
	Value      float64
	Text       string
	Missing    string
}

// value is f as one side of a row.
func (f Figure) value() *Value { return &Value{Value: f.Value, Text: f.Text, Missing: f.Missing} }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func streamRows(base, new *record.Run, rules Rules) []Row {
	type key struct{ stream, window, fig string }
	baseVals := map[key]Figure{}
	for _, w := range StreamWindows(base) {
		for _, f := range StreamFigures(w) {
			baseVals[key{w.Stream, w.Window, f.Name}] = f
		}
	}
	seen := map[key]bool{}
	rows := []Row{}
	errRate := map[key]int{} // stream window -> its error-rate row
	for _, w := range StreamWindows(new) {
		for _, f := range StreamFigures(w) {
			k := key{w.Stream, w.Window, f.Name}
			seen[k] = true
			row := Row{Subject: w.Stream, Window: w.Window, Figure: f.Name, Unit: f.Unit, New: f.value()}
			if b, ok := baseVals[k]; ok {
				row.Base = b.value()
				if b.Missing == "" && f.Missing == "" {
					setDelta(&row)
					judgeStream(&row, rules)
				}
			}
			if f.Name == "error-rate" {
				errRate[key{w.Stream, w.Window, ""}] = len(rows)
			}
			rows = append(rows, row)
		}
	}
	// A latency regression of the successful requests says beside it how
	// the error rate changed: together they say what the users saw.
	for i, r := range rows {
		if r.Figure != FigureOKP99 || r.Judgement != Regression {
			continue
		}
		if j, ok := errRate[key{r.Subject, r.Window, ""}]; ok && rows[j].Base != nil {
			rows[i].Why += fmt.Sprintf("; error rate %s -> %s beside it", rows[j].Base.Text, rows[j].New.Text)
		}
	}
	for _, w := range StreamWindows(base) {
		for _, f := range StreamFigures(w) {
			if !seen[key{w.Stream, w.Window, f.Name}] {
				rows = append(rows, Row{Subject: w.Stream, Window: w.Window, Figure: f.Name, Unit: f.Unit, Base: f.value()})
			}
		}
	}
	return rows
}

// judgeStream applies the p99 and error-rate rules to a row with both
// sides. The p99 rule judges the p99 of the successful requests
// ([FigureOKP99]).
func judgeStream(row *Row, rules Rules) {
	b, n := row.Base.Value, row.New.Value
	switch row.Figure {
	case FigureOKP99:
		row.Rule, row.Judgement = RuleP99, OK
		if worse(b, n, rules.P99Increase, ms(rules.P99Slack)) {
			row.Judgement = Regression
			row.Why = fmt.Sprintf("p99 of successful requests %s -> %s, %s, beyond %s and %s", row.Base.Text, row.New.Text, row.DeltaText,
				pct(rules.P99Increase), fmtDur(rules.P99Slack))
		}
	case "error-rate":
		row.Rule, row.Judgement = RuleErrorRate, OK
		if n-b > rules.ErrorRateIncrease+1e-12 {
			row.Judgement = Regression
			row.Why = fmt.Sprintf("error rate %s -> %s, %s, beyond %s", row.Base.Text, row.New.Text, row.DeltaText, points(rules.ErrorRateIncrease))
		}
	}
}

// findingKey names a compared finding figure.
type findingKey struct{ subject, fig string }

// FindingFigure is one figure of a run's findings as compare and the
// exported metrics use it.
type FindingFigure struct {
	// Kind is the finding's kind (detection, unroutable, recovery,
	// restarts); Subject what it is about ("order-gateway in pg-pause",
	// "orders after pg-pause", "order-gateway"); Figure the figure's name.
	Kind, Subject, Figure string
	// Unit is "s" or "count"; Value in it (-1 for a time that never
	// came); Text as printed.
	Unit  string
	Value float64
	Text  string
}

// FindingFigures returns the compared figures of run's findings, in the
// findings' order: detection (first and last replica, s), unroutable time
// (s, summed per service and fault, and the part after the fault),
// recovery (s) and restarts (count).
func FindingFigures(run *record.Run) []FindingFigure {
	var out []FindingFigure
	idx := map[findingKey]int{}
	put := func(kind, subj string, f findings.Figure, name string, sum bool) {
		k := findingKey{kind + " " + subj, name}
		if i, ok := idx[k]; ok {
			if sum && out[i].Value >= 0 && f.Value >= 0 {
				out[i].Value += f.Value
				out[i].Text = seconds(out[i].Value)
			}
			return
		}
		idx[k] = len(out)
		out = append(out, FindingFigure{Kind: kind, Subject: subj, Figure: name, Unit: f.Unit, Value: f.Value, Text: f.Text})
	}
	for _, fd := range run.Findings {
		switch fd.Kind {
		case findings.KindDetection:
			subj := fd.Service + " in " + fd.Fault
			for _, f := range fd.Figures {
				switch f.Name {
				case "detection": // never
					put("detection", subj, f, "detection-first", false)
					put("detection", subj, f, "detection-last", false)
				case "detection-first", "detection-last":
					put("detection", subj, f, f.Name, false)
				}
			}
		case findings.KindUnroutable:
			subj := fd.Service
			if fd.Fault != "" {
				subj += " in " + fd.Fault
			}
			for _, f := range fd.Figures {
				if f.Name == "length" || f.Name == "after-fault" {
					put("unroutable", subj, f, f.Name, true)
				}
			}
		case findings.KindRecovery:
			for _, f := range fd.Figures {
				if f.Name == "recovery" {
					put("recovery", fd.Stream+" after "+fd.Fault, f, f.Name, false)
				}
			}
		case findings.KindRestarts:
			for _, f := range fd.Figures {
				if f.Name == "restarts" {
					put("restarts", fd.Service, f, f.Name, false)
				}
			}
		}
	}
	return out
}

// findingFigures indexes [FindingFigures] for comparing.
func findingFigures(run *record.Run) ([]findingKey, map[findingKey]findings.Figure) {
	var order []findingKey
	vals := map[findingKey]findings.Figure{}
	for _, f := range FindingFigures(run) {
		k := findingKey{f.Kind + " " + f.Subject, f.Figure}
		order = append(order, k)
		vals[k] = findings.Figure{Name: f.Figure, Value: f.Value, Unit: f.Unit, Text: f.Text}
	}
	return order, vals
}

func findingRows(base, new *record.Run, rules Rules) []Row {
	bOrder, bVals := findingFigures(base)
	nOrder, nVals := findingFigures(new)
	rows := []Row{}
	add := func(k findingKey) {
		row := Row{Subject: k.subject, Figure: k.fig}
		b, hasB := bVals[k]
		n, hasN := nVals[k]
		// An unroutable interval absent from a run is zero seconds of it.
		if !hasB && hasN && n.Unit == "s" && hasPrefix(k.subject, "unroutable ") {
			b, hasB = findings.Figure{Name: k.fig, Value: 0, Unit: "s", Text: "0.0 s"}, true
		}
		if hasB && !hasN && b.Unit == "s" && hasPrefix(k.subject, "unroutable ") {
			n, hasN = findings.Figure{Name: k.fig, Value: 0, Unit: "s", Text: "0.0 s"}, true
		}
		if hasB {
			row.Unit, row.Base = b.Unit, &Value{Value: b.Value, Text: b.Text}
		}
		if hasN {
			row.Unit, row.New = n.Unit, &Value{Value: n.Value, Text: n.Text}
		}
		if hasB && hasN {
			if row.Base.Value >= 0 && row.New.Value >= 0 {
				setDelta(&row)
			}
			judgeFinding(&row, rules)
		}
		rows = append(rows, row)
	}
	for _, k := range nOrder {
		add(k)
	}
	for _, k := range bOrder {
		if _, ok := nVals[k]; !ok {
			add(k)
		}
	}
	return rows
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// judgeFinding applies the finding-time and new-restart rules.
func judgeFinding(row *Row, rules Rules) {
	b, n := row.Base.Value, row.New.Value
	switch row.Unit {
	case "s":
		row.Rule, row.Judgement = RuleFindingTime, OK
		switch {
		case n < 0 && b >= 0:
			row.Judgement = Regression
			row.Why = fmt.Sprintf("%s in the baseline, %s now", row.Base.Text, row.New.Text)
		case n >= 0 && b >= 0 && worse(b, n, rules.RecoveryIncrease, rules.RecoverySlack.Seconds()):
			row.Judgement = Regression
			row.Why = fmt.Sprintf("%s -> %s, %s, beyond %s and %s", row.Base.Text, row.New.Text, row.DeltaText,
				pct(rules.RecoveryIncrease), fmtDur(rules.RecoverySlack))
		}
	case "count":
		if !rules.NewRestarts {
			return
		}
		row.Rule, row.Judgement = RuleNewRestart, OK
		if n > b {
			row.Judgement = Regression
			row.Why = fmt.Sprintf("%s restarts in the baseline, %s now", row.Base.Text, row.New.Text)
		}
	}
}

// assertionDelta writes the change of an assertion's figure: latencies
// as FormatDelta does, counts as whole numbers, anything else (ratios,
// factors, metric values) as a signed number.
func assertionDelta(unit string, base, new float64) string {
	switch unit {
	case "ms":
		return FormatDelta(unit, base, new)
	case "count", "replicas":
		return signed(new-base, 0)
	case "ratio":
		return signed(new-base, 4)
	}
	return signed(new-base, 3)
}

// setDelta fills Delta and DeltaText of a row with both sides.
func setDelta(row *Row) {
	d := row.New.Value - row.Base.Value
	row.Delta = &d
	row.DeltaText = FormatDelta(row.Unit, row.Base.Value, row.New.Value)
}

// FormatDelta writes new-base in unit, signed, with the relative change
// for latencies, rates and times ("+12ms (+25%)", "+0.30 pts", "+1",
// "-0.5 s (-20%)"); a figure that grew tenfold or more has its change as a
// factor of the baseline's instead of a percentage ("+2.94s (x108)",
// "+5.0 s (x11.0)").
func FormatDelta(unit string, base, new float64) string {
	d := new - base
	rel := ""
	if base > 0 && unit != "ratio" && unit != "count" {
		rel = " (" + relative(base, new) + ")"
	}
	switch unit {
	case "ms":
		s := "+"
		if d < 0 {
			s = "-"
		}
		return s + assert.FormatDuration(time.Duration(math.Abs(d)*float64(time.Millisecond))) + rel
	case "ratio":
		return signed(100*d, 2) + " pts"
	case "req/s":
		return signed(d, 1) + "/s" + rel
	case "s":
		return signed(d, 1) + " s" + rel
	case "count":
		return signed(d, 0)
	}
	return signed(d, 3) + rel
}

// factorFrom is the ratio new/base from which a change is written as a
// factor: "+50487%" reads worse than "x506".
const factorFrom = 10

// relative writes the change from base (> 0) to new as a signed whole
// percentage ("+25%", "-100%"), or from tenfold on as a factor ("x12.3",
// "x506").
func relative(base, new float64) string {
	f := new / base
	switch {
	case f >= 100:
		return fmt.Sprintf("x%.0f", f)
	case f >= factorFrom:
		return fmt.Sprintf("x%.1f", f)
	}
	return signed(100*(new-base)/base, 0) + "%"
}

func signed(v float64, prec int) string {
	s := fmt.Sprintf("%+.*f", prec, v)
	if s == "-0" || s == "+0" || s == "-0.0" || s == "-0.00" {
		s = "+" + s[1:]
	}
	return s
}

func pct(f float64) string     { return fmt.Sprintf("%g%%", math.Round(f*1000)/10) }
func points(f float64) string  { return fmt.Sprintf("%g pts", math.Round(f*10000)/100) }
func seconds(v float64) string { return fmt.Sprintf("%.1f s", v) }

// SetDelta fills row's Delta and DeltaText from its two sides (both must
// be set), as a comparison does.
func SetDelta(row *Row) { setDelta(row) }

// JudgeStream applies the p99 and error-rate rules to a stream row whose
// sides are both set (Figure [FigureOKP99] or "error-rate"; others stay
// [NotJudged]).
func JudgeStream(row *Row, rules Rules) { judgeStream(row, rules) }

// JudgeFinding applies the finding-time rule (Unit "s") or the
// new-restart rule (Unit "count") to a finding row whose sides are both
// set.
func JudgeFinding(row *Row, rules Rules) { judgeFinding(row, rules) }
