package record

import (
	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/redact"
)

// Redacted replaces secret values in everything a run writes.
const Redacted = redact.Redacted

// RedactText applies the default redaction rules (internal/redact) to
// free text: sensitive header values, URL passwords, sensitive query and
// key=value values become [Redacted].
func RedactText(s string) string {
	return (*redact.Redactor)(nil).Text(s)
}

// Redactor returns the redaction rules of r: the defaults, the names its
// scenario adds (scenario.Redact) and the secret values known to the run
// ([Run.Secrets] and those written in its scenario).
func (r *Run) Redactor() *redact.Redactor {
	return r.Scenario.Redactor(r.Secrets...)
}

// Redact returns a copy of r, sharing nothing that it changes with r, as
// drill may write it (internal/redact's rules): the scenario through
// scenario.Scenario.Redacted (sensitive headers, URL passwords and query
// values, env values, bodies, basicAuth), and the plan's action details,
// event details, reasons and log lines, assertion messages and evidence,
// validity, cleanup and error texts, and the environment's Toxiproxy URL
// through its text rules. What judging reads (plan windows, events'
// kinds and times, series, assertions) is unchanged, so `drill report`
// re-judges a redacted record as it would the original. r is not
// modified.
func Redact(r *Run) *Run {
	rd := r.Redactor()
	c := *r
	c.Secrets = nil
	c.Scenario = r.Scenario.Redacted(rd)
	if r.Plan != nil {
		p := *r.Plan
		p.Actions = make([]plan.Action, len(r.Plan.Actions))
		for i, a := range r.Plan.Actions {
			a.Detail = rd.Text(a.Detail)
			p.Actions[i] = a
		}
		if r.Plan.Actions == nil {
			p.Actions = nil
		}
		c.Plan = &p
	}
	if r.Events != nil {
		c.Events = make([]event.Event, len(r.Events))
		for i, e := range r.Events {
			e.Detail = rd.Text(e.Detail)
			e.Reason = rd.Text(e.Reason)
			e.Logs = redactLines(rd, e.Logs)
			c.Events[i] = e
		}
	}
	if r.Results != nil {
		c.Results = make([]assert.Result, len(r.Results))
		for i, res := range r.Results {
			res.Message = rd.Text(res.Message)
			if res.Evidence != nil {
				ev := make([]assert.Evidence, len(res.Evidence))
				for j, e := range res.Evidence {
					e.Detail = rd.Text(e.Detail)
					e.Logs = redactLines(rd, e.Logs)
					ev[j] = e
				}
				res.Evidence = ev
			}
			c.Results[i] = res
		}
	}
	c.Validity.Problems = redactLines(rd, r.Validity.Problems)
	c.Validity.Warnings = redactLines(rd, r.Validity.Warnings)
	c.Cleanup.Command = rd.Text(r.Cleanup.Command)
	if r.Cleanup.Leftovers != nil {
		c.Cleanup.Leftovers = make([]Leftover, len(r.Cleanup.Leftovers))
		for i, l := range r.Cleanup.Leftovers {
			l.Name, l.Detail, l.Remove = rd.Text(l.Name), rd.Text(l.Detail), rd.Text(l.Remove)
			c.Cleanup.Leftovers[i] = l
		}
	}
	c.Aborted = rd.Text(r.Aborted)
	c.Error = rd.Text(r.Error)
	c.Environment.ToxiproxyURL = rd.Text(r.Environment.ToxiproxyURL)
	if r.Environment.Notes != nil {
		c.Environment.Notes = make(map[string]string, len(r.Environment.Notes))
		for k, v := range r.Environment.Notes {
			c.Environment.Notes[k] = rd.Text(v)
		}
	}
	return &c
}

func redactLines(rd *redact.Redactor, lines []string) []string {
	if lines == nil {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = rd.Text(l)
	}
	return out
}
