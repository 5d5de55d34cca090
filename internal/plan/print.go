package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Print writes the plan for people: what is brought up before t+0 (the
// BRING-UP section: dependencies, each service's setup step, replicas and
// probe timing), the timeline (one row per action and per window start or
// end, in time order; t+0 is the moment load starts), then which
// assertion judges which window, and for a restarts assertion whether it
// also counts the bring-up (includeStartup) and whether the scenario's
// expect.fail says a run must fail on it (then a last line names the
// assertions the run must fail on). It returns the first write error.
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
	if p.BringUp != nil {
		printBringUp(ew, p.BringUp)
		fmt.Fprintln(ew)
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT\tNAME\tDETAIL")
	if p.BringUp != nil {
		detail := "see BRING-UP"
		var counted []string
		for _, j := range p.Judgements {
			if j.IncludeStartup {
				counted = append(counted, j.Assertion)
			}
		}
		if len(counted) > 0 {
			detail += "; restarts in it count for " + strings.Join(counted, ", ") + " (includeStartup)"
		}
		fmt.Fprintf(tw, "before t+0\tbring-up\t%s\t%s\n", p.BringUp.Environment, detail)
	}
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
	fmt.Fprintln(tw, "ASSERTION\tTYPE\tWINDOW\tFROM\tTO\tNOTE")
	for _, j := range p.Judgements {
		win, _ := p.Window(j.Window)
		from, note := FormatOffset(win.Start), ""
		// Over the run window the restarts judge counts from t+0, the
		// warm-up included; over another window, only in it.
		fromZero := j.Type == "restarts" && j.Window == "run"
		switch {
		case j.IncludeStartup && fromZero:
			from = "bring-up"
			note = fmt.Sprintf("includeStartup: restarts from bring-up to %s count, the warm-up too", FormatOffset(win.End))
		case j.IncludeStartup:
			// The judge counts what happened before t+0 and in the window,
			// nothing between them.
			from = "bring-up"
			note = fmt.Sprintf("includeStartup: restarts before t+0 and in %s-%s count", FormatOffset(win.Start), FormatOffset(win.End))
			if win.Start > 0 {
				note += fmt.Sprintf(", not those in %s-%s", FormatOffset(0), FormatOffset(win.Start))
			}
		case fromZero:
			from = FormatOffset(0)
			note = "the warm-up counts; bring-up not counted (includeStartup: false)"
		case j.Type == "restarts":
			note = "bring-up not counted (includeStartup: false)"
		}
		if j.ExpectFail {
			note = joinNote("must fail (expect.fail)", note)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Assertion, j.Type, j.Window, from, FormatOffset(win.End), note)
	}
	tw.Flush()
	if fail := p.ExpectedFailures(); len(fail) > 0 {
		fmt.Fprintf(ew, "\nexpected verdict: FAIL (exit 1) on exactly %s (expect.fail); every other assertion must pass\n", strings.Join(fail, ", "))
	}
	return ew.err
}

// joinNote puts a before b, separated by "; " when both are set.
func joinNote(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

// printBringUp writes the BRING-UP section.
func printBringUp(w io.Writer, b *BringUp) {
	switch b.Environment {
	case "local":
		fmt.Fprintf(w, "BRING-UP before t+0 (local): the dependencies start, then each service in order (its setup step, then its replicas); load starts once every replica is ready, waiting at most %s (timeline.readyTimeout)\n", b.ReadyTimeout)
	case "kubernetes":
		fmt.Fprintln(w, "BRING-UP before t+0 (kubernetes): drill starts no service; the services are the cluster's pods, found by selector")
	case "compose":
		fmt.Fprintf(w, "BRING-UP before t+0 (compose): the dependencies start, then docker compose brings up %s, whose services' replicas and healthchecks are the file's\n", b.ComposeFile)
		if b.Traefik != "" {
			fmt.Fprintf(w, "  Traefik routes the load: %s; drill reads routing from its API and JSON access log\n", b.Traefik)
		}
	default:
		fmt.Fprintf(w, "BRING-UP before t+0 (%s): the dependencies start, then the environment's services\n", b.Environment)
	}
	if len(b.Dependencies) > 0 {
		fmt.Fprintf(w, "  dependencies: %s\n", strings.Join(b.Dependencies, ", "))
	}
	for _, s := range b.Services {
		if s.Setup != "" {
			fmt.Fprintf(w, "  setup of %s, before its replicas start: %s\n", s.Name, s.Setup)
		}
	}
	if len(b.Services) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICE\tREPLICAS\tPROBE\tCHECK\tDELAY\tPERIOD\tTIMEOUT\tSUCCESS\tFAILURE")
	for _, s := range b.Services {
		replicas := "-"
		if s.Replicas > 0 {
			replicas = fmt.Sprint(s.Replicas)
		}
		if s.Selector != "" {
			replicas = "selector " + s.Selector
		}
		if len(s.Probes) == 0 {
			none := "(none)"
			switch b.Environment {
			case "kubernetes":
				none = "(the cluster's)"
			case "compose":
				none = "(the Compose file's)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t\t\t\t\t\t\n", s.Name, replicas, none)
			continue
		}
		for i, p := range s.Probes {
			name, reps := s.Name, replicas
			if i > 0 {
				name, reps = "", ""
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", name, reps, p.Kind, p.Check, p.InitialDelay, p.Period, p.Timeout, p.SuccessThreshold, p.FailureThreshold)
		}
	}
	tw.Flush()
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
