package findings

import (
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/routing"
	"github.com/drillhq/drill/internal/scenario"
)

// DefaultClaimTolerance is how far a measured time may be from a claimed
// one and still agree, when a claim sets no tolerance.
const DefaultClaimTolerance = time.Second

// claims reports each of the scenario's claims beside the time the run
// measured: info when they agree within the claim's tolerance, notice
// (RuleClaimMismatch) when they differ or nothing was measured.
func (c *ctx) claims() []Finding {
	if c.in.Scenario == nil {
		return nil
	}
	var out []Finding
	for _, cl := range c.in.Scenario.Claims {
		var f faultSpan
		found := false
		for _, g := range c.faults {
			if g.name == cl.Fault {
				f, found = g, true
			}
		}
		if !found {
			continue
		}
		tol := DefaultClaimTolerance
		if cl.Tolerance != nil {
			tol = cl.Tolerance.D()
		}
		claimed := cl.Value.D()
		measured, ok := c.claimFigure(cl, f)
		fd := Finding{Kind: KindClaim, Severity: Info, Service: cl.Service, Fault: cl.Fault, Start: f.on, End: f.off,
			Figures: []Figure{secFigure("claimed", claimed)}}
		from := "after " + cl.Fault + " began"
		if cl.Figure == scenario.ClaimBackFirst || cl.Figure == scenario.ClaimBackLast {
			from = "after " + cl.Fault + " ended"
		}
		src := ""
		if cl.Source != "" {
			src = " (" + cl.Source + ")"
		}
		if !ok {
			fd.Severity, fd.Rule = Notice, RuleClaimMismatch
			fd.Figures = append(fd.Figures, Figure{Name: "measured", Value: -1, Unit: "s", Text: "never"})
			fd.Text = fmt.Sprintf("claim %s%s: %s %s %s %s; measured: never", cl.Name, src, cl.Service, cl.Figure, seconds(claimed), from)
			out = append(out, fd)
			continue
		}
		diff := measured - claimed
		fd.Figures = append(fd.Figures, secFigure("measured", measured), secFigure("difference", diff))
		verdict := "agrees"
		if diff > tol || -diff > tol {
			fd.Severity, fd.Rule = Notice, RuleClaimMismatch
			verdict = fmt.Sprintf("differs by %+.1f s", diff.Seconds())
		}
		fd.Text = fmt.Sprintf("claim %s%s: %s %s %s %s; measured %s (%s, tolerance %s)",
			cl.Name, src, cl.Service, cl.Figure, seconds(claimed), from, seconds(measured), verdict, seconds(tol))
		out = append(out, fd)
	}
	return out
}

// claimFigure measures a claim's figure for fault f.
func (c *ctx) claimFigure(cl scenario.Claim, f faultSpan) (time.Duration, bool) {
	tl := c.routes[cl.Service]
	var m map[string]time.Duration
	ref := f.on
	switch cl.Figure {
	case scenario.ClaimDetectionFirst, scenario.ClaimDetectionLast:
		m = routing.Unready(c.events, cl.Service, f.on, f.recEnd)
	case scenario.ClaimLeftFirst, scenario.ClaimLeftLast:
		m = tl.Left(f.on, f.recEnd)
	case scenario.ClaimBackFirst, scenario.ClaimBackLast:
		m, ref = tl.Back(f.off, c.end), f.off
	default:
		return 0, false
	}
	first, last, ok := routing.FirstLast(m)
	if !ok {
		return 0, false
	}
	switch cl.Figure {
	case scenario.ClaimDetectionFirst, scenario.ClaimLeftFirst, scenario.ClaimBackFirst:
		return first - ref, true
	}
	return last - ref, true
}
