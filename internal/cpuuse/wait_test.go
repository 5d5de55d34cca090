package cpuuse

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseRunDelay(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"1581302 734000 2\n", 734000, false},
		{"0 0 0", 0, false},
		{"1581302", 0, true},
		{"1 x 2", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseRunDelay(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseRunDelay(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestWaitAccount follows threads across readings: growth counts, a
// thread that starts after the first reading counts whole, one that exits
// keeps what was counted, and the first reading is the base.
func TestWaitAccount(t *testing.T) {
	var w waitAccount
	steps := []struct {
		name    string
		threads map[int]uint64
		want    uint64
	}{
		{"first reading is the base", map[int]uint64{1: 500, 2: 100}, 0},
		{"both grow", map[int]uint64{1: 700, 2: 150}, 250},
		{"a new thread counts whole", map[int]uint64{1: 700, 2: 150, 3: 40}, 290},
		{"an exited thread keeps its count", map[int]uint64{1: 710, 3: 40}, 300},
		{"a reused id with a smaller counter adds nothing", map[int]uint64{1: 710, 3: 5}, 300},
	}
	for _, st := range steps {
		if got := w.add(st.threads); got != st.want {
			t.Errorf("%s: total %d ns, want %d", st.name, got, st.want)
		}
	}
}

func TestReadRunDelays(t *testing.T) {
	root := t.TempDir()
	for tid, line := range map[string]string{"10": "5 300 1\n", "11": "7 20 2\n"} {
		dir := filepath.Join(root, "10", "task", tid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "schedstat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readRunDelays(root, 10)
	if err != nil || len(got) != 2 || got[10] != 300 || got[11] != 20 {
		t.Errorf("readRunDelays = %v, %v; want map[10:300 11:20]", got, err)
	}
	if _, err := readRunDelays(root, 99); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("readRunDelays of a missing process: error %v, want one wrapping os.ErrNotExist", err)
	}
}

// unwrapAll returns the innermost error of a %w chain.
func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// TestSamplerDrillWaitReal makes this process's threads wait for a CPU on
// the real machine: busy child processes on every core and as many busy
// goroutines here. The sampler must count drill's wait, and no more wait
// than its threads had time for.
func TestSamplerDrillWaitReal(t *testing.T) {
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/schedstat"); err != nil {
		t.Skipf("this kernel has no per-thread schedstat (CONFIG_SCHED_INFO): %v", err)
	}
	cores := runtime.NumCPU()
	for range cores {
		startChild(t, "busy")
	}
	var stop atomic.Bool
	defer stop.Store(true)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for !stop.Load() {
			}
		}()
	}
	start := time.Now()
	s, err := Start(context.Background(), Options{
		Interval: 100 * time.Millisecond,
		Now:      func() time.Duration { return time.Since(start) },
		Parts:    []Part{{Name: "drill", Kind: KindDrill, Self: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := s.sample(); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		last := s.samples[len(s.samples)-1]
		s.mu.Unlock()
		if !last.waitOK {
			t.Fatal("drill's run delay was not read")
		}
		if last.wait >= uint64(50*time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drill's threads waited only %v for a CPU in a minute beside %d busy processes", time.Duration(last.wait), cores)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop.Store(true)
	u := s.Stop()
	if u.DrillWaitSeconds == nil || *u.DrillWaitSeconds < 0.05 {
		t.Fatalf("DrillWaitSeconds %v, want at least 0.05 s", u.DrillWaitSeconds)
	}
	threads, err := readRunDelays("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A few threads may have exited meanwhile: 4 to spare.
	if limit := float64(len(threads)+4) * time.Since(start).Seconds(); *u.DrillWaitSeconds > limit {
		t.Errorf("DrillWaitSeconds %.3f s, more than %d threads could wait in %v", *u.DrillWaitSeconds, len(threads), time.Since(start))
	}
	var sum float64
	for _, sec := range u.Seconds {
		sum += sec.DrillWait
	}
	// Each figure is rounded to 1 ms.
	if d := math.Abs(sum - *u.DrillWaitSeconds); d > 0.0005*float64(len(u.Seconds)+1) {
		t.Errorf("per-second waits sum to %.3f s, the whole span's is %.3f s", sum, *u.DrillWaitSeconds)
	}
}
