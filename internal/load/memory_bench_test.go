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
// 1 % 503s, so histograms hold many distinct values. Run it with
// -benchtime=1x: one iteration is an hour of load.
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
	if journal {
		var err error
		if j, err = measure.CreateJournal(filepath.Join(b.TempDir(), measure.SecondsFile)); err != nil {
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
		}
	}
}
