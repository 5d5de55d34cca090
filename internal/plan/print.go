package plan

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// Print writes the plan as a timeline people can read: one row per action
// and per window start or end, in time order (t+0 is the moment load
// starts), then which assertion judges which window. It returns the first
// write error.
func Print(w io.Writer, p *Plan) error {
	type row struct {
		at    int64
		order int
		event string
		name  string
		info  string
	}
	var rows []row
	for _, a := range p.Actions {
		rows = append(rows, row{int64(a.At), 10 + actionOrder[a.Kind], string(a.Kind), a.Target, a.Detail})
	}
	for _, win := range p.Windows {
		info := fmt.Sprintf("until %s (%s)", FormatOffset(win.End), win.End-win.Start)
		if win.Manual {
			info = fmt.Sprintf("at most until %s: fault %s starts or ends by hand (drill run --ui)", FormatOffset(win.End), win.Fault)
		}
		rows = append(rows,
			row{int64(win.Start), 20, "window-start", win.Name, info},
			row{int64(win.End), 0, "window-end", win.Name, ""})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].at != rows[j].at {
			return rows[i].at < rows[j].at
		}
		return rows[i].order < rows[j].order
	})
	ew := &errWriter{w: &trimWriter{w: w}}
	fmt.Fprintf(ew, "plan for scenario %s: run %s, warmup %s (t+0 is the moment load starts)\n\n", p.Scenario, p.Duration, p.Warmup)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT\tNAME\tDETAIL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", FormatOffset(durationOf(r.at)), r.event, r.name, r.info)
	}
	tw.Flush()
	fmt.Fprintln(ew)
	if len(p.Judgements) == 0 {
		fmt.Fprintln(ew, "no assertions: the run measures and reports, and passes unless it cannot run")
		return ew.err
	}
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ASSERTION\tTYPE\tWINDOW\tFROM\tTO")
	for _, j := range p.Judgements {
		win, _ := p.Window(j.Window)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.Assertion, j.Type, j.Window, FormatOffset(win.Start), FormatOffset(win.End))
	}
	tw.Flush()
	return ew.err
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

// trimWriter drops trailing spaces from each line (tabwriter pads empty
// last cells).
type trimWriter struct {
	w       io.Writer
	pending []byte
}

func (t *trimWriter) Write(b []byte) (int, error) {
	for _, c := range b {
		switch c {
		case ' ':
			t.pending = append(t.pending, c)
			continue
		case '\n':
			t.pending = t.pending[:0]
		default:
			if len(t.pending) > 0 {
				if _, err := t.w.Write(t.pending); err != nil {
					return 0, err
				}
				t.pending = t.pending[:0]
			}
		}
		if _, err := t.w.Write([]byte{c}); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
