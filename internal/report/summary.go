package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/textio"
)

// maxSummaryEvidence caps the evidence lines printed per assertion.
const maxSummaryEvidence = 5

// Summary writes the terminal summary of run to w: per assertion its
// verdict, figure, bound and window (with the message and first evidence
// of any that did not pass); per stream and window the rate, p50, p90,
// p99, max and errors; validity and cleanup; and a final line
// "VERDICT: PASS|FAIL|INVALID|ABORTED|CLEANUP UNVERIFIED (exit N): reason".
// A CPU line (when the run measured it) says how busy the machine's cores
// were while load ran and each part's share (drill, each service's
// replicas, each dependency, other work). Findings (warnings first) come
// before validity, and a count of warning
// and notice findings just before the verdict: a PASS with warnings
// beside it is still a PASS, but nobody should read it alone.
// Authorization values are redacted. It returns the first write error.
func Summary(w io.Writer, run *record.Run) error {
	run = record.Redact(run)
	ew := &textio.ErrWriter{W: w}
	code, why := run.Decide()

	title := run.Name()
	if title == "" {
		title = "(unnamed scenario)"
	}
	fmt.Fprintf(ew, "drill %s  run %s", title, run.RunID)
	if !run.StartedAt.IsZero() {
		fmt.Fprintf(ew, "  started %s", run.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if run.ScenarioFile != "" {
		fmt.Fprintf(ew, "  (%s)", run.ScenarioFile)
	}
	fmt.Fprintln(ew)

	fmt.Fprintln(ew, "\nASSERTIONS")
	if len(run.Results) == 0 {
		fmt.Fprintln(ew, "  (none)")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  VERDICT\tNAME\tTYPE\tWINDOW\tFIGURE\tBOUND")
		for _, r := range run.Results {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", verdictWord(r.Verdict), r.Name, r.Type, r.Window, r.Figure.Text, r.Bound)
		}
		tw.Flush()
		for _, r := range run.Results {
			if r.Verdict == assert.Pass {
				continue
			}
			fmt.Fprintf(ew, "\n  %s %s: %s\n", verdictWord(r.Verdict), r.Name, r.Message)
			if r.Source != "" {
				fmt.Fprintf(ew, "    source: %s\n", r.Source)
			}
			for i, e := range r.Evidence {
				if i == maxSummaryEvidence {
					fmt.Fprintf(ew, "    ... %d more in the report\n", len(r.Evidence)-i)
					break
				}
				pod := ""
				if e.Pod != "" {
					pod = " " + e.Pod
				}
				fmt.Fprintf(ew, "    - %s%s: %s\n", assert.FormatOffset(e.At), pod, e.Detail)
				for _, l := range lastN(e.Logs, 3) {
					fmt.Fprintf(ew, "        | %s\n", l)
				}
			}
		}
	}

	writeClaims(ew, run.Claims())

	if len(run.Series) > 0 {
		fmt.Fprintln(ew, "\nSTREAMS")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  STREAM\tWINDOW\tRATE\tREQUESTS\tP50\tP90\tP99\tMAX\tERRORS\tSHED")
		for _, row := range streamRows(run) {
			s := row.stats
			fmt.Fprintf(tw, "  %s\t%s\t%.1f/s\t%d\t%s\t%s\t%s\t%s\t%d (%s)\t%d\n", row.stream, row.window, s.Rate, s.Requests,
				assert.FormatDuration(s.P50), assert.FormatDuration(s.P90), assert.FormatDuration(s.P99), assert.FormatDuration(s.Max),
				s.Failures, assert.FormatPercent(s.ErrorRate), s.Shed)
		}
		tw.Flush()
	}
	if len(run.LoadWorkers) > 0 {
		fmt.Fprintln(ew, "\nLOAD WORKERS")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  WORKER\tSTATE\tPOD\tSENT\tLATE\tLAG P99\tLAG MAX\tSTARTED LATE\tCLOCK")
		for _, lw := range run.LoadWorkers {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", lw.Index, lw.State, lw.Pod, lw.Sent, lw.Late,
				assert.FormatDuration(lw.LagP99), assert.FormatDuration(lw.LagMax), assert.FormatDuration(lw.StartedLate), orDash(lw.Clock))
		}
		tw.Flush()
		// A worker's error names the worker and its pod.
		for _, lw := range run.LoadWorkers {
			if lw.Error != "" {
				fmt.Fprintf(ew, "  %s\n", lw.Error)
			}
		}
	}

	writeFindings(ew, run.Findings)

	fmt.Fprintln(ew)
	for _, l := range startupLines(run.Events) {
		fmt.Fprintf(ew, "STARTUP   %s\n", l)
	}
	if run.CPU != nil {
		line := run.CPU.Line()
		if w := run.CPU.WaitWords(); w != "" {
			line += "; " + w
		}
		fmt.Fprintf(ew, "CPU       %s\n", line)
	}
	for _, n := range run.Environment.Nodes {
		fmt.Fprintf(ew, "NODE      %s\n", n.Line())
	}
	if p := run.Environment.Priority; p != nil && p.Summary != "" {
		fmt.Fprintf(ew, "PRIORITY  %s\n", p.Summary)
	}
	if run.Validity.Valid() {
		fmt.Fprintln(ew, "VALIDITY  ok: the load generator kept its schedule and every fault was on the path")
	} else {
		fmt.Fprintf(ew, "VALIDITY  INVALID: %s\n", run.Validity.Summary())
	}
	for _, wn := range run.Validity.Warnings {
		fmt.Fprintf(ew, "          warning: %s\n", wn)
	}
	if run.Cleanup.Verified {
		fmt.Fprintln(ew, "CLEANUP   verified: every injected fault was removed")
	} else {
		fmt.Fprintln(ew, "CLEANUP   NOT VERIFIED")
		for _, l := range run.Cleanup.Leftovers {
			fmt.Fprintf(ew, "          %s %s may still be active", l.Kind, l.Name)
			if l.Detail != "" {
				fmt.Fprintf(ew, " (%s)", l.Detail)
			}
			if l.Remove != "" {
				fmt.Fprintf(ew, "; remove it with: %s", l.Remove)
			}
			fmt.Fprintln(ew)
		}
		if run.Cleanup.Command != "" {
			fmt.Fprintf(ew, "          remove everything this run left with: %s\n", run.Cleanup.Command)
		}
	}
	if run.Aborted != "" {
		fmt.Fprintf(ew, "ABORTED   %s\n", run.Aborted)
	}
	if w, n := countSeverity(run.Findings); w+n > 0 {
		fmt.Fprintf(ew, "FINDINGS  %s, %s: read FINDINGS above before trusting the verdict\n", plural(w, "warning"), plural(n, "notice"))
	}
	fmt.Fprintf(ew, "\nVERDICT: %s (exit %d): %s\n", codeWord(code), code, why)
	return ew.Err
}

// writeClaims prints the CLAIMS section: each claim of the source
// documents the run's assertions checked (docs/CLAIMS.md), its verdict and
// the assertions that checked it; a naive twin's declared failures are
// marked "as expected". Nothing when no assertion names a claim.
func writeClaims(w io.Writer, cs []record.ClaimVerdict) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCLAIMS (of the source documents, by id: docs/CLAIMS.md)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", verdictWord(c.Verdict), c.ID, claimNote(c))
	}
	tw.Flush()
}

// claimNote names the assertions that checked a claim, and says when its
// failure was the one the scenario's expect.fail declared.
func claimNote(c record.ClaimVerdict) string {
	s := strings.Join(c.Assertions, ", ")
	if c.Expected {
		s += " (failed as expect.fail declares)"
	}
	return s
}

// writeFindings prints the FINDINGS section: one line per finding,
// warnings first (docs/DESIGN.md §10). Nothing when there are none.
func writeFindings(w io.Writer, fs []findings.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFINDINGS")
	for _, f := range fs {
		fmt.Fprintf(w, "  %-8s %s\n", severityWord(f.Severity), f.Text)
	}
}

// severityWord renders a finding's severity for the terminal.
func severityWord(s findings.Severity) string {
	switch s {
	case findings.Warning:
		return "WARNING"
	case findings.Notice:
		return "notice"
	}
	return "info"
}

// countSeverity counts warning and notice findings.
func countSeverity(fs []findings.Finding) (warnings, notices int) {
	for _, f := range fs {
		switch f.Severity {
		case findings.Warning:
			warnings++
		case findings.Notice:
			notices++
		}
	}
	return warnings, notices
}

// startupLines says, one line per service, what went wrong with its
// replicas before load started (events at negative times): container
// restarts per pod, CrashLoopBackOff back-offs, failed starts, and the
// first restart's cause. Services that came up cleanly get no line.
func startupLines(events []event.Event) []string {
	type tally struct {
		restarts, backoffs, failed int
		perPod                     map[string]int
		first                      string
	}
	by := map[string]*tally{}
	get := func(svc string) *tally {
		t := by[svc]
		if t == nil {
			t = &tally{perPod: map[string]int{}}
			by[svc] = t
		}
		return t
	}
	for _, e := range events {
		if e.At >= 0 {
			continue
		}
		switch {
		case e.Kind == event.ContainerRestart:
			t := get(e.Service)
			t.restarts++
			t.perPod[e.Pod]++
			if t.first == "" && e.Reason != "" {
				t.first = e.Reason
			}
		case e.Kind == event.K8sEvent && e.Reason == "BackOff":
			get(e.Service).backoffs++
		case e.Kind == event.K8sEvent && e.Reason == "Failed":
			get(e.Service).failed++
		}
	}
	svcs := make([]string, 0, len(by))
	for s := range by {
		svcs = append(svcs, s)
	}
	sort.Strings(svcs)
	var out []string
	for _, svc := range svcs {
		t := by[svc]
		name := svc
		if name == "" {
			name = "(unnamed service)"
		}
		pods := make([]string, 0, len(t.perPod))
		for p := range t.perPod {
			pods = append(pods, p)
		}
		sort.Strings(pods)
		var per []string
		for _, p := range pods {
			per = append(per, fmt.Sprintf("%s: %d", p, t.perPod[p]))
		}
		line := fmt.Sprintf("%s: %s before load", name, plural(t.restarts, "restart"))
		if len(per) > 0 {
			line += " (" + strings.Join(per, ", ") + ")"
		}
		if t.backoffs > 0 {
			line += ", " + plural(t.backoffs, "CrashLoopBackOff wait")
		}
		if t.failed > 0 {
			line += ", " + plural(t.failed, "failed start")
		}
		if t.first != "" {
			line += "; first: " + t.first
		}
		out = append(out, line)
	}
	return out
}

// verdictWord renders a verdict for the terminal.
func verdictWord(v assert.Verdict) string {
	switch v {
	case assert.Pass:
		return "PASS"
	case assert.Fail:
		return "FAIL"
	case assert.Aborted:
		return "ABORTED"
	}
	return "ERROR"
}

// codeWord names an exit code.
func codeWord(code int) string {
	switch code {
	case record.ExitPass:
		return "PASS"
	case record.ExitFail:
		return "FAIL"
	case record.ExitBadInput:
		return "BAD INPUT"
	case record.ExitCouldNotRun:
		return "ABORTED"
	case record.ExitInvalid:
		return "INVALID"
	case record.ExitCleanupFailed:
		return "CLEANUP UNVERIFIED"
	}
	return fmt.Sprintf("EXIT %d", code)
}

type streamRow struct {
	stream, window string
	stats          assert.StreamStats
}

// streamRows summarises each stream over each plan window (run first,
// then the plan's order), skipping windows where the stream sent nothing.
func streamRows(run *record.Run) []streamRow {
	var names []string
	for n := range run.Series {
		names = append(names, n)
	}
	sort.Strings(names)
	var wins []plan.Window
	if run.Plan != nil {
		wins = append(wins, run.Plan.Windows...)
		sort.SliceStable(wins, func(i, j int) bool { return wins[i].Name == "run" && wins[j].Name != "run" })
	}
	var rows []streamRow
	for _, n := range names {
		s := run.Series[n]
		if s == nil {
			continue
		}
		if len(wins) == 0 {
			from, to := seriesSpan(s)
			rows = append(rows, streamRow{n, "all", assert.Stats(s.Window(from, to))})
			continue
		}
		for _, w := range wins {
			// A run that ended early (interrupt, stop condition) is rated
			// over the time it actually ran, not the planned window.
			end := w.End
			if stop, ok := loadEnd(run); ok && stop < end {
				end = stop
			}
			if end <= w.Start {
				continue
			}
			b := s.Window(w.Start, end)
			if b.Requests == 0 && b.Intended == 0 {
				continue
			}
			rows = append(rows, streamRow{n, w.Name, assert.Stats(b)})
		}
	}
	return rows
}

// seriesSpan returns the time covered by s's buckets.
func seriesSpan(s *measure.Series) (from, to time.Duration) {
	if len(s.Buckets) == 0 {
		return 0, 0
	}
	first, last := s.Buckets[0], s.Buckets[len(s.Buckets)-1]
	return first.Start, last.Start + last.Width
}

func lastN(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return lines[len(lines)-n:]
}

// loadEnd is when load stopped (the run's "load-end" phase event).
func loadEnd(run *record.Run) (time.Duration, bool) {
	for i := len(run.Events) - 1; i >= 0; i-- {
		e := run.Events[i]
		if e.Kind == event.PhaseStart && e.Detail == "load-end" {
			return e.At, true
		}
	}
	return 0, false
}

// plural writes n and noun, adding "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// orDash is s, or "-" when s is empty (a table cell with nothing to say).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
