// Package report writes what a run leaves behind for CI and for people
// (docs/DESIGN.md §13): run.json (the versioned run record), junit.xml (one
// test case per assertion), report.html (self-contained: plots made with
// gonum/plot embedded as PNG data URLs, the assertions, the streams and a
// timeline of events) and the terminal summary. Everything written is
// redacted first (Authorization headers, secret-looking environment).
package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/history"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
)

// File names written by [WriteAll].
const (
	RunFile   = "run.json"
	JUnitFile = "junit.xml"
	HTMLFile  = "report.html"
)

// maxTimelineEvents caps the rows of the HTML timeline.
const maxTimelineEvents = 2000

//go:embed report.html.tmpl
var htmlTemplate string

// WriteAll writes run.json, junit.xml and report.html into dir (created
// if needed), then the history summary run.summary.json, which is a cache
// and written on a best-effort basis (see writeSummary). It returns the
// first error, wrapped with the file it was writing; files already
// written are left in place.
func WriteAll(dir string, run *record.Run) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create report directory %s: %w", dir, err)
	}
	// run.Save, keeping the bytes for the history summary.
	runFile := filepath.Join(dir, RunFile)
	runJSON, err := record.Marshal(run)
	if err != nil {
		return err
	}
	if err := record.WriteFile(runFile, "run record", runJSON); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, JUnitFile), func(w io.Writer) error { return WriteJUnit(w, run) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, HTMLFile), func(w io.Writer) error { return WriteHTML(w, run) }); err != nil {
		return err
	}
	writeSummary(runFile, runJSON)
	return nil
}

// writeSummary writes the history summary (run.summary.json) beside the
// run.json just written, from its bytes as written (redacted, and decoded
// as drill history would decode them, so the summary is exactly what
// history would compute from the record), so that drill history over many
// nights never has to decode whole records. The summary is a cache keyed
// by run.json's hash: history ignores a missing or stale one and reads
// the record instead, so a failure here costs only speed and does not
// fail the run's reports.
func writeSummary(runFile string, runJSON []byte) {
	saved, err := record.Unmarshal(runJSON)
	if err != nil {
		return
	}
	_ = history.WriteSummary(runFile, runJSON, saved)
}

// writeFile renders into memory and writes path only when rendering worked.
func writeFile(path string, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// htmlView is what report.html.tmpl renders.
type htmlView struct {
	Title, Description, RunID, Started, File, Env string
	Sources                                       []string
	Code                                          int
	CodeWord, Why, Class                          string
	Valid                                         bool
	ValiditySummary                               string
	Warnings                                      []string
	CleanupVerified                               bool
	Leftovers                                     []record.Leftover
	CleanupCommand                                string
	Aborted                                       string
	Faults                                        []string
	Findings                                      []findingView
	FindingsWarnings, FindingsNotices             int
	Results                                       []resultView
	Claims                                        []claimView
	Streams                                       []streamView
	Workers                                       []workerView
	Figures                                       []figureView
	Events                                        []eventView
	EventsNote                                    string
}

type resultView struct {
	Name, Type, Source, Window, Span, Figure, Bound, Message string
	Word, Class                                              string
	Open                                                     bool
	Extra                                                    []assert.Figure
	Evidence                                                 []evidenceView
}

// claimView is one row of the claims table: a claim of the source
// documents the run's assertions checked.
type claimView struct {
	ID, Word, Class, Note string
}

// findingView is one finding of the findings box.
type findingView struct {
	Word, Class, Kind, Text string
}

type evidenceView struct {
	At, Pod, Detail string
	Logs            []string
}

type streamView struct {
	Stream, Window, Rate, P50, P90, P99, Max, Errors string
	Requests, Shed                                   int64
}

// workerView is one row of the load workers table: a worker's account
// of its share of the load (record.LoadWorker), durations formatted.
type workerView struct {
	Index                          int
	State, Pod, LagP99, LagMax, Up string
	Clock, Error                   string
	Sent, LateN                    int64
	Failed                         bool
}

type figureView struct {
	Title, Note string
	Src         template.URL
}

type eventView struct {
	At, Kind, Where, What string
	Logs                  []string
}

// WriteHTML writes the self-contained HTML report of run to w.
func WriteHTML(w io.Writer, run *record.Run) error {
	run = record.Redact(run)
	t, err := template.New("report").Parse(htmlTemplate)
	if err != nil {
		return fmt.Errorf("parse report template: %w", err)
	}
	figs, err := Figures(run)
	if err != nil {
		return err
	}
	v := buildView(run)
	for _, f := range figs {
		v.Figures = append(v.Figures, figureView{Title: f.Title, Note: f.Note, Src: template.URL(f.DataURL)})
	}
	if err := t.Execute(w, v); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	return nil
}

func buildView(run *record.Run) htmlView {
	code, why := run.Decide()
	v := htmlView{
		Title: run.Name(), RunID: run.RunID, File: run.ScenarioFile,
		Code: code, CodeWord: codeWord(code), Why: why,
		Valid: run.Validity.Valid(), ValiditySummary: run.Validity.Summary(), Warnings: run.Validity.Warnings,
		CleanupVerified: run.Cleanup.Verified, Leftovers: run.Cleanup.Leftovers, CleanupCommand: run.Cleanup.Command, Aborted: run.Aborted,
	}
	if v.Title == "" {
		v.Title = "(unnamed scenario)"
	}
	switch code {
	case record.ExitPass:
		v.Class = "pass"
	case record.ExitFail:
		v.Class = "fail"
	case record.ExitCouldNotRun:
		v.Class = "aborted"
	default:
		v.Class = "invalid"
	}
	if run.Scenario != nil {
		v.Description = run.Scenario.Metadata.Description
		v.Sources = run.Scenario.Metadata.Sources
		for _, f := range run.Scenario.Faults {
			v.Faults = append(v.Faults, fmt.Sprintf("%s: %s on %s%s at t=%s for %s", f.Name, f.Type, f.Proxy, f.Dependency,
				f.At.D(), f.For.D()))
		}
	}
	if !run.StartedAt.IsZero() {
		v.Started = run.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	env := run.Environment
	var envParts []string
	for _, s := range []string{env.Type, env.KubeContext, env.Namespace, env.DrillVersion, env.GoVersion} {
		if s != "" {
			envParts = append(envParts, s)
		}
	}
	if env.OS != "" {
		envParts = append(envParts, env.OS+"/"+env.Arch)
	}
	if env.CPUs > 0 {
		envParts = append(envParts, fmt.Sprintf("%d CPUs", env.CPUs))
	}
	v.Env = strings.Join(envParts, " · ")

	for _, f := range run.Findings {
		v.Findings = append(v.Findings, findingView{Word: severityWord(f.Severity), Class: string(f.Severity), Kind: string(f.Kind), Text: f.Text})
	}
	v.FindingsWarnings, v.FindingsNotices = countSeverity(run.Findings)
	for _, r := range run.Results {
		rv := resultView{Name: r.Name, Type: string(r.Type), Source: r.Source, Window: r.Window,
			Span:   assert.FormatOffset(r.WindowStart) + " .. " + assert.FormatOffset(r.WindowEnd),
			Figure: r.Figure.Text, Bound: r.Bound, Message: r.Message, Extra: r.Extra,
			Word: verdictWord(r.Verdict), Class: string(r.Verdict), Open: r.Verdict != assert.Pass}
		for _, e := range r.Evidence {
			rv.Evidence = append(rv.Evidence, evidenceView{At: assert.FormatOffset(e.At), Pod: e.Pod, Detail: e.Detail, Logs: e.Logs})
		}
		v.Results = append(v.Results, rv)
	}
	for _, c := range run.Claims() {
		v.Claims = append(v.Claims, claimView{ID: c.ID, Word: verdictWord(c.Verdict), Class: string(c.Verdict), Note: claimNote(c)})
	}
	for _, row := range streamRows(run) {
		s := row.stats
		v.Streams = append(v.Streams, streamView{Stream: row.stream, Window: row.window,
			Rate: fmt.Sprintf("%.1f/s", s.Rate), Requests: s.Requests,
			P50: assert.FormatDuration(s.P50), P90: assert.FormatDuration(s.P90),
			P99: assert.FormatDuration(s.P99), Max: assert.FormatDuration(s.Max),
			Errors: fmt.Sprintf("%d (%s)", s.Failures, assert.FormatPercent(s.ErrorRate)), Shed: s.Shed})
	}
	for _, lw := range run.LoadWorkers {
		wv := workerView{Index: lw.Index, State: lw.State, Pod: lw.Pod, Sent: lw.Sent, LateN: lw.Late,
			LagP99: assert.FormatDuration(lw.LagP99), LagMax: assert.FormatDuration(lw.LagMax),
			Up: assert.FormatDuration(lw.StartedLate), Clock: orDash(lw.Clock), Error: lw.Error,
			Failed: lw.State == record.LoadWorkerFailed}
		wv.Pod = orDash(wv.Pod)
		v.Workers = append(v.Workers, wv)
	}
	v.Events, v.EventsNote = timeline(run)
	return v
}

// timeline picks the events worth a row: everything but metric samples
// and passing probes, at most maxTimelineEvents.
func timeline(run *record.Run) ([]eventView, string) {
	var out []eventView
	skipped := map[string]int{}
	total := 0
	for _, e := range run.Events {
		if e.Kind == event.Metric {
			skipped["metric samples"]++
			continue
		}
		if e.Kind == event.ProbeResult && e.OK {
			skipped["passing probes"]++
			continue
		}
		total++
		if len(out) >= maxTimelineEvents {
			continue
		}
		out = append(out, eventView{At: assert.FormatOffset(e.At), Kind: string(e.Kind), Where: where(e), What: what(run.Plan, e), Logs: e.Logs})
	}
	var notes []string
	if total > len(out) {
		notes = append(notes, fmt.Sprintf("first %d of %d events shown", len(out), total))
	}
	var keys []string
	for k := range skipped {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		notes = append(notes, fmt.Sprintf("%d %s not listed", skipped[k], k))
	}
	if len(notes) == 0 {
		return out, ""
	}
	return out, strings.Join(notes, "; ") + " (all are in run.json)."
}

func where(e event.Event) string {
	var parts []string
	for _, s := range []string{e.Service, e.Pod, e.Container} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if e.Fault != "" {
		parts = append(parts, "fault "+e.Fault)
	}
	if e.Operator != "" {
		parts = append(parts, "by "+e.Operator)
	}
	if len(parts) == 0 {
		return e.Source
	}
	return strings.Join(parts, " / ")
}

func what(p *plan.Plan, e event.Event) string {
	var parts []string
	if e.Probe != "" {
		parts = append(parts, e.Probe+" probe")
	}
	if e.Kind == event.ProbeResult {
		if e.OK {
			parts = append(parts, "ok")
		} else {
			parts = append(parts, "failed")
		}
	}
	if e.RestartCount > 0 {
		parts = append(parts, fmt.Sprintf("restartCount %d", e.RestartCount))
	}
	if e.Reason != "" {
		parts = append(parts, e.Reason)
	}
	if e.Address != "" {
		parts = append(parts, e.Address)
	}
	if e.Detail != "" {
		parts = append(parts, e.Detail)
	}
	if p != nil && e.At >= 0 {
		parts = append(parts, "("+phaseName(p, e)+")")
	}
	return strings.Join(parts, "; ")
}

// phaseName names the most specific plan window containing e.
func phaseName(p *plan.Plan, e event.Event) string {
	best := ""
	for _, w := range p.Windows {
		if e.At >= w.Start && e.At < w.End {
			if best == "" || strings.HasPrefix(w.Name, "fault:") || (strings.HasPrefix(w.Name, "recovery:") && !strings.HasPrefix(best, "fault:")) {
				best = w.Name
			}
		}
	}
	if best == "" {
		if e.At < p.Warmup {
			return "warmup"
		}
		return "after run"
	}
	return best
}
