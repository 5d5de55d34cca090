package assert

import (
	"fmt"
	"strconv"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// judgeCheck judges a check assertion: of the responses the stream's
// check applied to in the window, the share that failed it, against
// maxRate (default 0). A window where the check applied to no response
// fails; the evidence is the window's first failures.
func judgeCheck(in *input, a scenario.Assertion, r *Result) {
	if a.Check == "" {
		setError(r, "check assertion needs check: the name of one of the stream's checks")
		return
	}
	maxRate := 0.0
	if a.MaxRate != nil {
		maxRate = *a.MaxRate
	}
	r.Bound = "<= " + FormatPercent(maxRate) + " failed"
	s := streamSeries(in, a, r)
	if s == nil {
		return
	}
	b := s.Window(in.win.Start, in.win.End)
	c := b.Checks[a.Check]
	if c.Applied == 0 {
		r.Verdict = Fail
		r.Figure = Figure{Unit: "ratio", Text: "no response checked"}
		r.Message = fmt.Sprintf("check %s of %s applied to no response in %s (%d requests completed there): it claims something about responses that never came; bound %s",
			a.Check, a.Stream, r.Window, b.Requests, r.Bound)
		return
	}
	rate := float64(c.Failed) / float64(c.Applied)
	r.Figure = ratioFigure("", rate, fmt.Sprintf("%s of %s failed (%s)", thousands(c.Failed), thousands(c.Applied), FormatPercent(rate)))
	r.Extra = []Figure{
		countFigure("applied", int(c.Applied), "response"),
		countFigure("failed", int(c.Failed), "response"),
	}
	for _, f := range c.Examples {
		r.Evidence = append(r.Evidence, Evidence{At: f.At, Detail: checkFailureText(f)})
	}
	r.Verdict = verdict(rate <= maxRate)
	r.Message = fmt.Sprintf("check %s of %s: %s of %s responses failed in %s (%s); bound %s",
		a.Check, a.Stream, thousands(c.Failed), thousands(c.Applied), r.Window, FormatPercent(rate), r.Bound)
	if len(c.Examples) > 0 {
		r.Message += "; first: " + checkFailureText(c.Examples[0])
	}
}

// checkFailureText is one failure as evidence: "503 at t=12.345s: Retry-After \"7\" != \"5\"".
func checkFailureText(f measure.CheckFailure) string {
	return fmt.Sprintf("%d at %s: %s", f.Status, FormatOffset(f.At), f.Reason)
}

// thousands renders n with comma separators: 1075 -> "1,075".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
