// Package progress shows a run's live state: the phase, the active faults
// and, per load stream, the achieved rate against the intended one, the p99
// latency of the last few seconds and the errors. On a terminal it redraws
// one block in place; otherwise (CI logs) it writes one plain line per
// update.
package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/drillhq/drill/internal/load"
)

// Snapshot is what one update shows.
type Snapshot struct {
	// Elapsed is the run clock's offset now; Total the planned run length (0: unknown).
	Elapsed, Total time.Duration
	// Phase names the timeline phase (warmup, baseline, fault:<name>, recovery:<name>, ...).
	Phase string
	// Faults lists the faults active now.
	Faults []string
	// Streams are the load streams' live figures (load.Engine.Live).
	Streams []load.StreamLive
	// Note is an optional last line (e.g. a stop condition that fired).
	Note string
}

// Printer writes snapshots to w. Safe for concurrent use.
type Printer struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	every time.Duration
	lines int // lines of the block drawn last (tty)
}

// New returns a printer writing to w: in place when isTTY, plain lines
// otherwise. every is the period of [Printer.Run] (default 1 s on a
// terminal, 5 s otherwise).
func New(w io.Writer, isTTY bool, every time.Duration) *Printer {
	if every <= 0 {
		every = time.Second
		if !isTTY {
			every = 5 * time.Second
		}
	}
	return &Printer{w: w, tty: isTTY, every: every}
}

// IsTerminal reports whether f is a terminal (false for pipes and files).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// Update draws s now.
func (p *Printer) Update(s Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		fmt.Fprintln(p.w, Line(s))
		return
	}
	lines := Block(s)
	var b strings.Builder
	if p.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.lines) // back to the block's first line
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("\x1b[J") // clear what a longer previous block left below
	p.lines = len(lines)
	_, _ = io.WriteString(p.w, b.String())
}

// Run calls source and draws its snapshot every period until ctx ends,
// then draws a last one.
func (p *Printer) Run(ctx context.Context, source func() Snapshot) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.Update(source())
			return
		case <-t.C:
			p.Update(source())
		}
	}
}

// Block renders s as the lines of the in-place terminal block.
func Block(s Snapshot) []string {
	head := "t=" + clock(s.Elapsed)
	if s.Total > 0 {
		head += "/" + clock(s.Total)
	}
	if s.Phase != "" {
		head += "  phase " + s.Phase
	}
	faults := "none"
	if len(s.Faults) > 0 {
		faults = strings.Join(s.Faults, ", ")
	}
	out := []string{head + "  faults: " + faults}
	if len(s.Streams) > 0 {
		w := len("stream")
		for _, st := range s.Streams {
			w = max(w, len(st.Stream))
		}
		out = append(out, fmt.Sprintf("  %-*s %16s %9s %14s %9s %6s", w, "stream", "rate (req/s)", "p99 5s", "errors 5s", "inflight", "late"))
		for _, st := range s.Streams {
			out = append(out, fmt.Sprintf("  %-*s %16s %9s %14s %9d %6d", w, st.Stream, rateCol(st), dur(st.P99), errCol(st), st.InFlight, st.Late))
		}
	}
	if s.Note != "" {
		out = append(out, "  "+s.Note)
	}
	return out
}

// Line renders s as one plain line for logs.
func Line(s Snapshot) string {
	var b strings.Builder
	b.WriteString("t=" + clock(s.Elapsed))
	if s.Phase != "" {
		b.WriteString(" phase=" + s.Phase)
	}
	if len(s.Faults) > 0 {
		b.WriteString(" faults=" + strings.Join(s.Faults, ","))
	} else {
		b.WriteString(" faults=none")
	}
	for _, st := range s.Streams {
		fmt.Fprintf(&b, " | %s %s rate=%s p99=%s errors=%s", st.Stream, st.State, rateCol(st), dur(st.P99), errCol(st))
	}
	if s.Note != "" {
		b.WriteString(" | " + s.Note)
	}
	return b.String()
}

func rateCol(st load.StreamLive) string {
	if st.State == "pending" || st.State == "skipped" {
		return st.State
	}
	return fmt.Sprintf("%.0f/%.0f", st.AchievedRate, st.IntendedRate)
}

func errCol(st load.StreamLive) string {
	if st.Requests == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%.1f%%)", st.Failures, 100*st.ErrorRate)
}

func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

func clock(d time.Duration) string {
	if d < 0 {
		return "-" + clock(-d)
	}
	s := int(d / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
