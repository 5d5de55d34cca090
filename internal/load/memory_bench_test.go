package load

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// seedsRates are the seed drills' streams (req/s): 2,800 orders, 1,400
// card auths, 150 tax calls; 4,350 in all.
var seedsRates = []struct {
	name string
	rate int
}{{"orders", 2800}, {"card-auth", 1400}, {"tax", 150}}

// rssMiB reads this process's resident set size from /proc (MiB; 0 where
// there is no /proc).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseFloat(f[1], 64)
	return pages * float64(os.Getpagesize()) / (1 << 20)
}

// BenchmarkLongRunMemory feeds the seeds' load (4,350 req/s over three
// streams) into the engine's recorders on a fast-forwarded clock, one
// simulated second at a time, closing seconds as Engine.Run does each
// second (timeout 2 s + 2 s behind), and prints the Go heap in use, the
// RSS and the seconds held after 1, 10 and 60 simulated minutes: with a
// journal (closed seconds written to seconds.jsonl, as drill run does) and
// without (every second kept packed in memory, as before the journal).
// Latencies spread over 0.5-50 ms with a tail to 2 s, lags over 0-500 µs,
// 1 % 503s, so histograms hold many distinct values. With the journal it
// also reads the journal so far back at each of those points, as the end
// of drill run does to judge and report (measure.LoadSeries, then the run
// window and every second's p50/p99/max, as the judge and the plots
// read them), and prints the heap that holds while the series is live and
// the time the read took. Run it with -benchtime=1x: one iteration is an
// hour of load.
func BenchmarkLongRunMemory(b *testing.B) {
	for _, mode := range []string{"journal", "memory"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				longRun(b, mode == "journal")
			}
		})
	}
}

func longRun(b *testing.B, journal bool) {
	const timeout = 2 * time.Second
	recs := make([]*recorder, len(seedsRates))
	for i := range recs {
		recs[i] = newRecorder(time.Second, 0)
	}
	var j *measure.Journal
	path := filepath.Join(b.TempDir(), measure.SecondsFile)
	if journal {
		var err error
		if j, err = measure.CreateJournal(path); err != nil {
			b.Fatal(err)
		}
		defer j.Close()
	}
	x := uint64(88172645463325252)
	rnd := func() uint64 { // xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	report := map[int]bool{1: true, 10: true, 60: true}
	for sec := 0; sec < 3600; sec++ {
		for i, st := range seedsRates {
			r := recs[i]
			for n := 0; n < st.rate; n++ {
				at := time.Duration(sec)*time.Second + time.Duration(n)*time.Second/time.Duration(st.rate)
				lat := 500*time.Microsecond + time.Duration(rnd()%50_000)*time.Microsecond
				if rnd()%1000 == 0 {
					lat = time.Duration(rnd()%2000) * time.Millisecond
				}
				code := 200
				if rnd()%100 == 0 {
					code = 503
				}
				r.record(outcome{intended: at, latency: lat, lag: time.Duration(rnd()%500) * time.Microsecond, code: code, retryAfter: code == 503})
			}
			// The clock is at sec+1.
			before := time.Duration(sec+1)*time.Second - timeout - 2*time.Second
			if !journal {
				r.pack(before)
				continue
			}
			cs := r.closeSeconds(0, floorDiv(before, time.Second))
			for _, c := range cs {
				c.b.Intended = int64(st.rate)
				if err := j.WriteSecond(st.name, c.b); err != nil {
					b.Fatal(err)
				}
			}
			r.recycle(cs)
		}
		if min := (sec + 1) / 60; (sec+1)%60 == 0 && report[min] {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			held := 0
			for _, r := range recs {
				held += r.held()
			}
			heap := float64(ms.HeapInuse) / (1 << 20)
			fmt.Printf("long run (%s) %2d min at 4,350 req/s: heap in use %6.1f MiB, RSS %6.1f MiB, seconds held %d\n",
				map[bool]string{true: "journal", false: "memory"}[journal], min, heap, rssMiB(), held)
			b.ReportMetric(heap, fmt.Sprintf("heapMiB@%dmin", min))
			if journal {
				readBack(b, path, min)
			}
		}
	}
}

// readBack reads the journal at path as the end of drill run does and
// prints the heap in use while the series it built is live, above the
// heap before, and how long reading and walking it took.
func readBack(b *testing.B, path string, min int) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	series, err := measure.LoadSeries(path)
	if err != nil {
		b.Fatal(err)
	}
	seconds := 0
	var sink time.Duration
	for _, s := range series {
		sink += s.Total().Quantile(99)
		for _, sec := range s.Buckets {
			sink += sec.Quantile(50) + sec.Quantile(99) + sec.Max()
			seconds++
		}
	}
	took := time.Since(t0)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(series)
	held := (float64(after.HeapInuse) - float64(before.HeapInuse)) / (1 << 20)
	fmt.Printf("  read back at %2d min: %d stream-seconds, series heap %6.1f MiB (%.1f KB per stream-second), RSS %6.1f MiB, read and walk %s (p99s sum %s)\n",
		min, seconds, held, held*1024/float64(max(seconds, 1)), rssMiB(), took.Round(time.Millisecond), sink.Round(time.Second))
	b.ReportMetric(held, fmt.Sprintf("seriesMiB@%dmin", min))
}
