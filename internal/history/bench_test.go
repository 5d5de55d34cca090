package history

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/record"
)

// yearOfNights writes n nights of the short orders drill under dir, one
// report directory per night a day apart: each night is one of the three
// recorded runs (their streams, events and findings differ) with its
// assertions' figures moved by up to ±30 % in a yearly and a weekly wave,
// and its own run id and start time. It returns the newest night's
// run.json.
func yearOfNights(tb testing.TB, dir string, n int) string {
	tb.Helper()
	var bases [][]byte
	for i := 1; i <= 3; i++ {
		r, err := record.Load(filepath.Join(realRuns, fmt.Sprintf("night-%d", i), "run.json"))
		if err != nil {
			tb.Fatal(err)
		}
		b, err := record.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		bases = append(bases, b)
	}
	first := time.Date(2025, 12, 2, 2, 0, 0, 0, time.UTC)
	var newest string
	for i := range n {
		r, err := record.Unmarshal(bases[i%len(bases)])
		if err != nil {
			tb.Fatal(err)
		}
		start := first.AddDate(0, 0, i)
		r.RunID = fmt.Sprintf("%s.%06d", start.Format("20060102.150405"), i)
		r.StartedAt = start
		if r.EndedAt.After(r.StartedAt) {
			r.EndedAt = start.Add(r.EndedAt.Sub(r.StartedAt))
		}
		f := 1 + 0.2*math.Sin(2*math.Pi*float64(i)/365) + 0.1*math.Sin(2*math.Pi*float64(i)/7)
		for j := range r.Results {
			r.Results[j].Figure.Value *= f
		}
		newest = filepath.Join(dir, "orders-db-brownout-short-"+start.Format("20060102T150405Z"), "run.json")
		if err := r.Save(newest); err != nil {
			tb.Fatal(err)
		}
	}
	return newest
}

// removeSummaries deletes every summary file under dir.
func removeSummaries(tb testing.TB, dir string) {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*", "run.summary.json"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			tb.Fatal(err)
		}
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapPeak samples the live heap (runtime/metrics, no stop-the-world)
// every millisecond until stop, and returns the highest sample in bytes.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		read()
		return peak.Load()
	}
}

// BenchmarkHistoryYear is drill history over 365 nights of the short
// orders drill, as the command runs it: find and summarise every
// run.json, judge the newest against the median of the 5 before, write
// the tables and the trend page. "summaries" reads the summary files a
// previous history left beside each run.json (the nightly case: only
// tonight's run is new, or every run.json's writer wrote one); "cold"
// has none and loads every record. Besides
// ns/op and allocs it reports the peak live heap during one history
// (peak-heap-MB) and the CPU time one history took (cpu-s/op, the
// heap sampler's included; steadier than ns/op on a shared machine).
func BenchmarkHistoryYear(b *testing.B) {
	const nights = 365
	dir := b.TempDir()
	yearOfNights(b, dir, nights)
	history := func(b *testing.B, opt Options) {
		ns, err := Load([]string{dir}, opt)
		if err != nil {
			b.Fatal(err)
		}
		if len(ns) != nights {
			b.Fatalf("%d nights, want %d", len(ns), nights)
		}
		j, err := Judge(ns, 5, compare.DefaultRules())
		if err != nil {
			b.Fatal(err)
		}
		rep := Build(ns, j)
		if err := WriteText(io.Discard, rep); err != nil {
			b.Fatal(err)
		}
		var page bytes.Buffer
		if err := WriteHTML(&page, rep); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name      string
		summaries bool
	}{
		{"cold", false},
		{"summaries", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opt := Options{}
			if bc.summaries {
				if _, err := Load([]string{dir}, Options{WriteSummaries: true}); err != nil {
					b.Fatal(err)
				}
			} else {
				removeSummaries(b, dir)
			}
			var peak uint64
			var cpu time.Duration
			b.ReportAllocs()
			for b.Loop() {
				runtime.GC()
				stop := heapPeak()
				before := cpuTime(b)
				history(b, opt)
				cpu += cpuTime(b) - before
				peak = max(peak, stop())
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
