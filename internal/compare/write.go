package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/drillhq/drill/internal/textio"
)

// WriteJSON writes r as indented JSON (the shape of [Report]) to w. It
// returns the first write or encoding error.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write comparison as JSON: %w", err)
	}
	return nil
}

// WriteText writes r for people: the two runs, then tables of the
// assertions (figure, bound, verdict on each side), the streams' figures
// per window and the findings' figures, each with its delta and
// judgement, the regressions, and a last line "COMPARE: NO REGRESSION
// (exit 0)" or "COMPARE: REGRESSION (exit 1): <first regression>". It
// returns the first write error.
func WriteText(w io.Writer, r *Report) error {
	ew := &textio.ErrWriter{W: w, What: "write comparison"}
	side := func(label string, i RunInfo) {
		fmt.Fprintf(ew, "%s  %s  run %s", label, i.Scenario, i.RunID)
		if !i.StartedAt.IsZero() {
			fmt.Fprintf(ew, "  started %s", i.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		fmt.Fprintf(ew, "  exit %d", i.ExitCode)
		if i.Path != "" {
			fmt.Fprintf(ew, "  (%s)", i.Path)
		}
		fmt.Fprintln(ew)
	}
	side("BASE", r.Base)
	side("NEW ", r.New)
	if r.Forced {
		fmt.Fprintln(ew, "FORCED: the runs are of different scenarios (--force)")
	}

	fmt.Fprintln(ew, "\nASSERTIONS")
	if len(r.Assertions) == 0 {
		fmt.Fprintln(ew, "  (none)")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tWINDOW\tBASE\tBOUND\tVERDICT\tNEW\tBOUND\tVERDICT\tDELTA\tJUDGEMENT")
		for _, a := range r.Assertions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Subject, a.Window, text(a.Base), dash(a.BaseBound), dash(a.BaseVerdict),
				text(a.New), dash(a.NewBound), dash(a.NewVerdict), dash(a.DeltaText), judgement(a.Row))
		}
		tw.Flush()
	}

	fmt.Fprintln(ew, "\nSTREAMS (ok-p50, ok-p90, ok-p99: latency of the successful requests, status 2xx and 3xx; failed requests count in error-rate)")
	if len(r.Streams) == 0 {
		fmt.Fprintln(ew, "  (none)")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  STREAM\tWINDOW\tFIGURE\tBASE\tNEW\tDELTA\tJUDGEMENT")
		for _, s := range r.Streams {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Subject, s.Window, s.Figure, text(s.Base), text(s.New), dash(s.DeltaText), judgement(s))
		}
		tw.Flush()
	}

	fmt.Fprintln(ew, "\nFINDINGS")
	if len(r.Findings) == 0 {
		fmt.Fprintln(ew, "  (none)")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  FINDING\tFIGURE\tBASE\tNEW\tDELTA\tJUDGEMENT")
		for _, f := range r.Findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", f.Subject, f.Figure, text(f.Base), text(f.New), dash(f.DeltaText), judgement(f))
		}
		tw.Flush()
	}

	rl := r.Rules
	restarts, p2f := "off", "off"
	if rl.NewRestarts {
		restarts = "on"
	}
	if rl.PassToFail {
		p2f = "on"
	}
	fmt.Fprintf(ew, "\nRULES     p99 of successful requests worse by > %s and > %s; error rate up by > %s; finding times worse by > %s and > %s; new restart %s; pass to fail %s\n",
		pct(rl.P99Increase), fmtDur(rl.P99Slack), points(rl.ErrorRateIncrease), pct(rl.RecoveryIncrease), fmtDur(rl.RecoverySlack), restarts, p2f)
	for _, g := range r.Regressions {
		fmt.Fprintf(ew, "REGRESSED %s\n", g)
	}
	if r.Regressed() {
		fmt.Fprintf(ew, "COMPARE: REGRESSION (exit %d): %s\n", r.ExitCode(), r.Regressions[0])
	} else {
		fmt.Fprintf(ew, "COMPARE: NO REGRESSION (exit %d)\n", r.ExitCode())
	}
	return ew.Err
}

func text(v *Value) string {
	if v == nil {
		return "-"
	}
	return v.Text
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func judgement(r Row) string {
	switch r.Judgement {
	case Regression:
		return "REGRESSION"
	case OK:
		return "ok"
	}
	return "-"
}
