package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/record"
)

// JUnit XML in the shape CI systems read (Jenkins, GitLab, GitHub
// reporters): <testsuites><testsuite><testcase> with <failure> for a
// failed assertion and <error> for one that could not be judged.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name       string          `xml:"name,attr"`
	Classname  string          `xml:"classname,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Failure    *junitProblem   `xml:"failure,omitempty"`
	Error      *junitProblem   `xml:"error,omitempty"`
	Skipped    *junitSkipped   `xml:"skipped,omitempty"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// junitSkipped marks a test case that was not judged (its window was cut
// short by an abort).
type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// junitText is element text written as CDATA, newlines kept.
type junitText struct {
	Text string `xml:",cdata"`
}

func text(s string) *junitText {
	if s == "" {
		return nil
	}
	return &junitText{Text: s}
}

// WriteJUnit writes run as JUnit XML: one test suite named after the
// scenario, one test case per assertion (failure message "<figure> vs
// <bound>", properties window, source, figure and bound), plus the cases
// "measurement validity" and "cleanup verified" so an invalid or unclean
// run shows in CI too, and a "findings" case (always passing) whose
// system-out lists the run's findings. Authorization values are redacted.
func WriteJUnit(w io.Writer, run *record.Run) error {
	run = record.Redact(run)
	name := run.Name()
	if name == "" {
		name = "drill"
	}
	secs := runSeconds(run)
	suite := junitSuite{Name: name, Time: secs}
	if !run.StartedAt.IsZero() {
		suite.Timestamp = run.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	suite.Hostname = run.Environment.Hostname
	code, why := run.Decide()
	suite.Properties = []junitProperty{
		{"run.id", run.RunID},
		{"scenario.file", run.ScenarioFile},
		{"exit.code", fmt.Sprint(code)},
		{"verdict", why},
	}
	class := "drill." + name
	for _, r := range run.Results {
		c := junitCase{Name: r.Name, Classname: class + "." + string(r.Type), Time: "0"}
		c.Properties = []junitProperty{{"window", r.Window}, {"figure", r.Figure.Text}, {"bound", r.Bound}}
		if r.Source != "" {
			c.Properties = append(c.Properties, junitProperty{"source", r.Source})
		}
		for _, f := range r.Extra {
			c.Properties = append(c.Properties, junitProperty{"figure." + f.Name, f.Text})
		}
		body := caseBody(r)
		switch r.Verdict {
		case assert.Pass:
			c.SystemOut = text(body)
		case assert.Fail:
			suite.Failures++
			c.Failure = &junitProblem{Message: r.Figure.Text + " vs " + r.Bound, Type: string(r.Type), Text: body}
		case assert.Aborted:
			suite.Skipped++
			c.Skipped = &junitSkipped{Message: r.Message}
			c.SystemOut = text(body)
		default:
			suite.Errors++
			c.Error = &junitProblem{Message: "could not judge: " + r.Message, Type: string(r.Type), Text: body}
		}
		suite.Cases = append(suite.Cases, c)
	}
	valid := junitCase{Name: "measurement validity", Classname: class + ".run", Time: "0"}
	if !run.Validity.Valid() {
		suite.Errors++
		valid.Error = &junitProblem{Message: "the measurement is invalid: " + run.Validity.Summary(), Type: "validity",
			Text: run.Validity.Summary()}
	} else {
		valid.SystemOut = text("the load generator kept its schedule and every fault was on the path")
	}
	if len(run.Validity.Warnings) > 0 {
		w := "warnings:\n" + strings.Join(run.Validity.Warnings, "\n")
		if valid.SystemOut != nil {
			w = valid.SystemOut.Text + "\n" + w
		}
		valid.SystemOut = text(w)
	}
	clean := junitCase{Name: "cleanup verified", Classname: class + ".run", Time: "0"}
	if !run.Cleanup.Verified {
		suite.Errors++
		var lines []string
		for _, l := range run.Cleanup.Leftovers {
			lines = append(lines, fmt.Sprintf("%s %s may still be active (%s); remove it with: %s", l.Kind, l.Name, l.Detail, l.Remove))
		}
		if run.Cleanup.Command != "" {
			lines = append(lines, "remove everything this run left with: "+run.Cleanup.Command)
		}
		clean.Error = &junitProblem{Message: "cleanup could not be verified", Type: "cleanup", Text: strings.Join(lines, "\n")}
	} else {
		clean.SystemOut = text("every injected fault was removed")
	}
	suite.Cases = append(suite.Cases, valid, clean)
	if len(run.Findings) > 0 {
		// Findings never fail the suite; CI shows them as the output of a
		// passing case so a PASS is never read without them.
		var lines []string
		for _, f := range run.Findings {
			lines = append(lines, severityWord(f.Severity)+": "+f.Text)
		}
		w, n := countSeverity(run.Findings)
		suite.Cases = append(suite.Cases, junitCase{Name: "findings", Classname: class + ".run", Time: "0",
			Properties: []junitProperty{{"warnings", fmt.Sprint(w)}, {"notices", fmt.Sprint(n)}},
			SystemOut:  text(strings.Join(lines, "\n"))})
	}
	if run.Aborted != "" {
		suite.Errors++
		suite.Cases = append(suite.Cases, junitCase{Name: "run completed", Classname: class + ".run", Time: secs,
			Error: &junitProblem{Message: "the run could not be carried out: " + run.Aborted, Type: "aborted"}})
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "drill", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Time: secs,
		Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

// caseBody is the text of a test case: message, figures and evidence.
func caseBody(r assert.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nwindow: %s [%s, %s)\nfigure: %s\nbound: %s\n", r.Message, r.Window,
		assert.FormatOffset(r.WindowStart), assert.FormatOffset(r.WindowEnd), r.Figure.Text, r.Bound)
	for _, f := range r.Extra {
		fmt.Fprintf(&b, "%s: %s\n", f.Name, f.Text)
	}
	if len(r.Evidence) > 0 {
		b.WriteString("evidence:\n")
	}
	for _, e := range r.Evidence {
		pod := ""
		if e.Pod != "" {
			pod = " " + e.Pod
		}
		fmt.Fprintf(&b, "- %s%s: %s\n", assert.FormatOffset(e.At), pod, e.Detail)
		for _, l := range e.Logs {
			fmt.Fprintf(&b, "    | %s\n", l)
		}
	}
	return b.String()
}

// runSeconds is the run's length in seconds for JUnit's time attribute.
func runSeconds(run *record.Run) string {
	if !run.StartedAt.IsZero() && run.EndedAt.After(run.StartedAt) {
		return fmt.Sprintf("%.3f", run.EndedAt.Sub(run.StartedAt).Seconds())
	}
	if run.Plan != nil {
		return fmt.Sprintf("%.3f", run.Plan.Duration.Seconds())
	}
	return "0"
}
