// Command tracelag reads a Go execution trace of drill (the hidden
// `--trace-late FILE` flag of drill run and drill load writes one when a
// stream first falls behind its schedule) and prints, per time bin, what
// the load generator's dispatch path waited for.
//
//	go run ./bench/tracelag [-bin 50ms] FILE
//
// Columns: the pacer's time runnable (waiting for a processor), running,
// asleep and parked in a channel send (ms); hand-offs, the workers the
// pacer woke to send a hit (the worker stamps the hit's send time when it
// runs), with the 90th percentile and the maximum of their wait from
// runnable to running (ms); workers the pacer started (all were busy);
// goroutines started anywhere in drill; GC mark assists begun.
//
// The trace holds about the 5 s before the write; bins are numbered from
// its first event. Times are of drill's Go scheduler only: a thread the
// kernel did not run shows as its goroutine running.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	bin := flag.Duration("bin", 50*time.Millisecond, "width of a time bin")
	flag.Parse()
	if flag.NArg() != 1 || *bin <= 0 {
		fmt.Fprintln(os.Stderr, "usage: tracelag [-bin 50ms] TRACE-FILE")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracelag:", err)
		os.Exit(1)
	}
	defer f.Close()
	bins, err := analyse(f, *bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracelag:", err)
		os.Exit(1)
	}
	write(os.Stdout, bins, *bin)
}

// binStat is what happened in one time bin.
type binStat struct {
	pacer      map[string]time.Duration // pacer time by state ("runnable", "running", "sleep", "send")
	handoffs   []time.Duration          // worker wake delays after the pacer's hand-off
	spawned    int                      // workers the pacer started
	goroutines int                      // goroutines started
	assists    int                      // GC mark assists begun
}

// role tells the generator's goroutines by their stacks: vegeta's attack
// loop (the pacer) and its workers.
func role(st trace.Stack) string {
	var b strings.Builder
	for fr := range st.Frames() {
		b.WriteString(fr.Func)
		b.WriteByte(';')
	}
	s := b.String()
	switch {
	case strings.Contains(s, "Attacker).Attack.func1"):
		return "pacer"
	case strings.Contains(s, "Attacker).attack"):
		return "worker"
	}
	return ""
}

// sendsHit reports whether st, the pacer's stack as it woke a worker, is
// a send on its channel of hits (a hand-off), not the close of that
// channel when the attack ends.
func sendsHit(st trace.Stack) bool {
	for fr := range st.Frames() {
		return strings.HasPrefix(fr.Func, "runtime.selectgo") || strings.HasPrefix(fr.Func, "runtime.chansend")
	}
	return false
}

func analyse(r io.Reader, width time.Duration) ([]*binStat, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a Go execution trace: %w", err)
	}
	var first trace.Time
	var bins []*binStat
	at := func(t trace.Time) *binStat {
		i := int(time.Duration(t-first) / width)
		for len(bins) <= i {
			bins = append(bins, &binStat{pacer: map[string]time.Duration{}})
		}
		return bins[i]
	}
	roles := map[trace.GoID]string{}
	var pacer trace.GoID = trace.NoGoroutine
	var pState string
	var pSince trace.Time
	// pacerState adds the pacer's time in its current state up to t,
	// split over the bins it spans.
	pacerState := func(t trace.Time) {
		for pSince != 0 && pState != "" && pSince < t {
			end := first + trace.Time((time.Duration(pSince-first)/width+1)*width)
			end = min(end, t)
			at(pSince).pacer[pState] += time.Duration(end - pSince)
			pSince = end
		}
	}
	handedAt := map[trace.GoID]trace.Time{}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if first == 0 {
			first = ev.Time()
		}
		switch ev.Kind() {
		case trace.EventRangeBegin:
			if strings.Contains(ev.Range().Name, "mark assist") {
				at(ev.Time()).assists++
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if _, ok := roles[id]; !ok {
				// A goroutine's role is known from its creation stack or
				// from a stack of its own; until then it is asked again.
				r := role(st.Stack)
				if r == "" && ev.Goroutine() == id {
					r = role(ev.Stack())
				}
				if r != "" || from == trace.GoNotExist {
					roles[id] = r
				}
				if r == "pacer" {
					pacer = id
				}
			}
			if from == trace.GoNotExist {
				b := at(ev.Time())
				b.goroutines++
				if roles[id] == "worker" && ev.Goroutine() == pacer {
					b.spawned++
				}
			}
			if id == pacer {
				pacerState(ev.Time())
				pSince = ev.Time()
				switch to {
				case trace.GoRunnable:
					pState = "runnable"
				case trace.GoRunning:
					pState = "running"
				case trace.GoWaiting:
					pState = "send"
					if strings.Contains(st.Reason, "sleep") {
						pState = "sleep"
					}
				default:
					pState = strings.ToLower(to.String())
				}
			}
			if roles[id] == "worker" && to == trace.GoRunnable && ev.Goroutine() == pacer && pacer != trace.NoGoroutine && sendsHit(ev.Stack()) {
				handedAt[id] = ev.Time()
			}
			if to == trace.GoRunning {
				if t0, ok := handedAt[id]; ok {
					b := at(ev.Time())
					b.handoffs = append(b.handoffs, time.Duration(ev.Time()-t0))
					delete(handedAt, id)
				}
			}
		}
	}
	if pacer == trace.NoGoroutine {
		return bins, fmt.Errorf("no vegeta pacer goroutine in this trace (was it written by drill with --trace-late?)")
	}
	return bins, nil
}

func write(w io.Writer, bins []*binStat, width time.Duration) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(w, "%8s  %-34s  %8s %8s %8s  %7s %10s %7s\n", "t (s)", "pacer ms runnable/running/sleep/send", "handoffs", "p90 ms", "max ms", "spawned", "goroutines", "assists")
	var all []time.Duration
	for i, b := range bins {
		h := slices.Clone(b.handoffs)
		slices.Sort(h)
		all = append(all, h...)
		p90, mx := time.Duration(0), time.Duration(0)
		if len(h) > 0 {
			p90, mx = h[len(h)*9/10], h[len(h)-1]
		}
		p := b.pacer
		fmt.Fprintf(w, "%8.2f  %-34s  %8d %8s %8s  %7d %10d %7d\n", (time.Duration(i) * width).Seconds(),
			ms(p["runnable"])+"/"+ms(p["running"])+"/"+ms(p["sleep"])+"/"+ms(p["send"]),
			len(h), ms(p90), ms(mx), b.spawned, b.goroutines, b.assists)
	}
	slices.Sort(all)
	if n := len(all); n > 0 {
		fmt.Fprintf(w, "hand-offs: %d, wait p50 %s ms, p90 %s ms, p99 %s ms, max %s ms\n", n, ms(all[n/2]), ms(all[n*9/10]), ms(all[n*99/100]), ms(all[n-1]))
	}
}
