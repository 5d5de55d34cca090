package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// lateAfter is the default lag budget's bound (10 ms): a hit sent later
// than this after its intended time is late.
const lateAfter = 10 * time.Millisecond

// hang runs one stream of rate req/s for dur against url (a target that
// holds every request, e.g. bench/stub -hold 2s) and prints what the
// engine measured and what the process held at its peak. CPU is measured
// outside (bench/run.sh times the process).
func hang(url string, rate int, dur time.Duration, log *slog.Logger) error {
	if url == "" {
		return errors.New("hang needs -url")
	}
	st := stream("hang", url, rate, dur)
	var peakG int
	eng, err := run([]scenario.Stream{st}, log, func(_ *load.Engine, clock *event.Clock) {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			peakG = max(peakG, runtime.NumGoroutine())
			if clock.Now() > dur+3*time.Second {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	t := eng.Series()["hang"].Total()
	printHang("drill", t.Requests, t.Intended, t.OK, measure.Quantile(t.Lag, 50), measure.Quantile(t.Lag, 99), t.Late, t.Quantile(50))
	fmt.Printf("  drill peak RSS %.1f MiB, peak goroutines %d, validity %s\n", float64(peakRSS())/(1<<20), peakG, errOrOK(eng.Validity()))
	return nil
}

// vegetaLag reads a vegeta results file and prints the hang figures of
// that attack. vegeta records when each hit went out (Timestamp) and its
// sequence number, not when it was due; hit k of a constant rate was due
// at t0 + k/rate, with t0 the attack's start, taken as the earliest
// Timestamp - k/rate over all hits (so the least late hit has lag 0).
func vegetaLag(path string, rate int) error {
	if path == "" || rate <= 0 {
		return errors.New("vegeta-lag needs -rate and a results file")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := vegeta.NewDecoder(f)
	type hit struct {
		seq uint64
		ts  time.Time
	}
	var hits []hit
	var ok int64
	var t0 time.Time
	step := time.Second / time.Duration(rate)
	for {
		var r vegeta.Result
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("decode %s: %w", path, err)
		}
		hits = append(hits, hit{r.Seq, r.Timestamp})
		if r.Code >= 200 && r.Code < 400 && r.Error == "" {
			ok++
		}
		if due := r.Timestamp.Add(-time.Duration(r.Seq) * step); t0.IsZero() || due.Before(t0) {
			t0 = due
		}
	}
	lag := measure.NewHist()
	var late int64
	for _, h := range hits {
		l := h.ts.Sub(t0.Add(time.Duration(h.seq) * step))
		measure.Record(lag, l)
		if l > lateAfter {
			late++
		}
	}
	printHang("vegeta", int64(len(hits)), 0, ok, measure.Quantile(lag, 50), measure.Quantile(lag, 99), late, 0)
	return nil
}

func printHang(who string, sent, intended, ok int64, lag50, lag99 time.Duration, late int64, p50 time.Duration) {
	share := 0.0
	if sent > 0 {
		share = 100 * float64(late) / float64(sent)
	}
	fmt.Printf("  %s hang: sent=%d intended=%d ok=%d lag p50=%s lag p99=%s late(>10ms)=%d (%.2f%%) latency p50=%s\n",
		who, sent, intended, ok, lag50, lag99, late, share, p50)
}

// peakRSS returns the process's peak resident set size in bytes (VmHWM).
func peakRSS() int64 { return procStatusKB("VmHWM:") << 10 }
