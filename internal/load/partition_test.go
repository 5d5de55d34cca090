package load

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// TestPartitionUnionIsWholeSchedule: for every schedule kind and worker
// count, the workers' hits together are exactly the one-process schedule:
// each whole-schedule hit belongs to one worker (i mod N), due at the same
// time, and the workers' counts before any t add up to the whole count.
func TestPartitionUnionIsWholeSchedule(t *testing.T) {
	tests := []struct {
		name string
		st   scenario.Stream
		dur  time.Duration
	}{
		{"constant", scenario.Stream{Rate: rate(2800, time.Second)}, 3 * time.Second},
		{"constant-odd", scenario.Stream{Rate: rate(7, 3*time.Second)}, 10 * time.Second},
		{"ramp", scenario.Stream{Ramp: &scenario.Ramp{From: *rate(0, time.Second), To: *rate(500, time.Second)}}, 2 * time.Second},
		{"steps", scenario.Stream{Steps: []scenario.Step{{Rate: *rate(100, time.Second), For: dur(time.Second)}, {Rate: *rate(0, time.Second), For: dur(time.Second)}, {Rate: *rate(333, time.Second), For: dur(time.Second)}}}, 3 * time.Second},
	}
	for _, tc := range tests {
		for _, n := range []int{1, 2, 3, 4, 7} {
			t.Run(tc.name+"/"+strconv.Itoa(n), func(t *testing.T) {
				whole, err := newSchedule(tc.st, tc.dur)
				if err != nil {
					t.Fatal(err)
				}
				parts := make([]schedule, n)
				for i := range parts {
					if parts[i], err = newPartSchedule(whole, Partition{Index: i, Count: n}); err != nil {
						t.Fatal(err)
					}
				}
				// Every hit of the whole schedule, once, at its time.
				next := make([]uint64, n)
				for g := range whole.Total() {
					i := int(g % uint64(n))
					k := next[i]
					next[i]++
					if got, want := parts[i].At(k), whole.At(g); got != want {
						t.Fatalf("worker %d hit %d (whole %d) at %s, whole schedule has %s", i, k, g, got, want)
					}
					if got := (Partition{Index: i, Count: n}).Global(k); n > 1 && got != g {
						t.Fatalf("worker %d hit %d: Global %d, want %d", i, k, got, g)
					}
				}
				var total uint64
				for i, p := range parts {
					if p.Total() != next[i] {
						t.Fatalf("worker %d: Total %d, has %d hits", i, p.Total(), next[i])
					}
					total += p.Total()
				}
				if total != whole.Total() {
					t.Fatalf("workers' totals sum to %d, whole schedule %d", total, whole.Total())
				}
				// Counts agree at every millisecond and at every hit's own time.
				check := func(at time.Duration) {
					var sum uint64
					for _, p := range parts {
						sum += p.Count(at)
					}
					if w := whole.Count(at); sum != w {
						t.Fatalf("Count(%s): workers sum to %d, whole schedule %d", at, sum, w)
					}
				}
				for at := time.Duration(0); at <= tc.dur+time.Millisecond; at += time.Millisecond {
					check(at)
				}
				for g := range min(whole.Total(), 2000) {
					check(whole.At(g))
					check(whole.At(g) + 1)
				}
			})
		}
	}
}

func TestPartitionValidate(t *testing.T) {
	tests := []struct {
		p  Partition
		ok bool
	}{
		{Partition{}, true},
		{Partition{Index: 0, Count: 1}, true},
		{Partition{Index: 2, Count: 3}, true},
		{Partition{Index: 3, Count: 3}, false},
		{Partition{Index: -1, Count: 3}, false},
		{Partition{Index: 1, Count: 1}, false},
		{Partition{Count: -2}, false},
	}
	for _, tc := range tests {
		if err := tc.p.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

// TestPartitionedEnginesSendWholeSchedule: three engines, one per worker,
// on clocks that share t=0, against one server: the server sees every
// sequence number of the whole schedule exactly once, and the workers'
// intended counts per second add up to the one-process schedule's.
func TestPartitionedEnginesSendWholeSchedule(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n, err := strconv.Atoi(string(b))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[n]++
		mu.Unlock()
	}))
	defer srv.Close()

	const workers = 3
	st := scenario.Stream{
		Name:      "s",
		Targets:   []scenario.Target{{Method: "POST", URL: srv.URL, Body: "{{.Seq}}"}},
		Rate:      rate(200, time.Second),
		Duration:  dur(2 * time.Second),
		Start:     dur(300 * time.Millisecond),
		LagBudget: relaxed,
	}
	whole, err := newSchedule(st, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// One shared t=0 (each worker its own clock, as on separate machines).
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	engines := make([]*Engine, workers)
	for i := range engines {
		e, err := New(event.NewClockAt(t0), []scenario.Stream{st}, Options{RunID: "r", Partition: Partition{Index: i, Count: workers}}, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		engines[i] = e
	}
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Go(func() {
			if err := e.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	if len(seen) != int(whole.Total()) {
		t.Errorf("server saw %d distinct sequence numbers, schedule has %d", len(seen), whole.Total())
	}
	for g := range int(whole.Total()) {
		if seen[g] != 1 {
			t.Errorf("sequence number %d sent %d times, want once", g, seen[g])
		}
	}
	perSecond := map[time.Duration]int64{}
	var intended int64
	for i, e := range engines {
		if err := e.Validity(); err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
		for _, b := range e.Series()["s"].Buckets {
			perSecond[b.Start] += b.Intended
			intended += b.Intended
		}
	}
	if intended != int64(whole.Total()) {
		t.Errorf("workers' intended counts sum to %d, schedule has %d", intended, whole.Total())
	}
	// The stream starts at t=0.3 s: its 400 hits fall 140, 200 and 60 into
	// the seconds 0, 1 and 2 of the shared clock.
	want := map[time.Duration]int64{0: 140, time.Second: 200, 2 * time.Second: 60}
	for at, n := range want {
		if perSecond[at] != n {
			t.Errorf("second %s: intended %d, want %d (all: %v)", at, perSecond[at], n, perSecond)
		}
	}
}
