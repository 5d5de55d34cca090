package load

import (
	"math"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/scenario"
)

func rate(freq int, per time.Duration) *scenario.Rate { return &scenario.Rate{Freq: freq, Per: per} }

func dur(d time.Duration) scenario.Duration { return scenario.Duration{Duration: d} }

// firesOf runs pacer the way vegeta's attack loop does with an idle,
// punctual generator (time advances by exactly the wait) and returns the
// fire times.
func firesOf(t *testing.T, p vegeta.Pacer, limit int) []time.Duration {
	t.Helper()
	var out []time.Duration
	var elapsed time.Duration
	for hits := uint64(0); ; hits++ {
		wait, stop := p.Pace(elapsed, hits)
		if stop {
			return out
		}
		elapsed += wait
		out = append(out, elapsed)
		if len(out) > limit {
			t.Fatalf("pacer did not stop after %d hits", limit)
		}
	}
}

func TestScheduleIntendedTimes(t *testing.T) {
	tests := []struct {
		name    string
		stream  scenario.Stream
		dur     time.Duration
		total   uint64
		at      map[uint64]time.Duration // spot checks of At(n)
		perSec  []uint64                 // hits due in each second
		maxSkew time.Duration            // allowed |At(n) - expected| for spot checks
	}{
		{
			name:   "constant 100/s",
			stream: scenario.Stream{Rate: rate(100, time.Second)},
			dur:    3 * time.Second, total: 300,
			at:     map[uint64]time.Duration{0: 0, 99: 990 * time.Millisecond, 100: time.Second, 299: 2990 * time.Millisecond},
			perSec: []uint64{100, 100, 100},
		},
		{
			name:   "constant 90/m",
			stream: scenario.Stream{Rate: rate(90, time.Minute)},
			dur:    2 * time.Second, total: 3,
			at:     map[uint64]time.Duration{0: 0, 2: 2 * 666666666},
			perSec: []uint64{2, 1},
		},
		{
			name:   "ramp 0 to 100/s over 10s",
			stream: scenario.Stream{Ramp: &scenario.Ramp{From: *rate(0, time.Second), To: *rate(100, time.Second)}},
			dur:    10 * time.Second, total: 500, // H(t) = 5t², At(n) = sqrt(n/5)
			at: map[uint64]time.Duration{
				0:   0,
				5:   time.Second,     // H(1) = 5
				20:  2 * time.Second, // H(2) = 20
				499: 9989994995,      // sqrt(99.8) s
			},
			perSec:  []uint64{5, 15, 25, 35, 45, 55, 65, 75, 85, 95},
			maxSkew: time.Microsecond,
		},
		{
			name: "steps 50/s, 0/s, 100/s",
			stream: scenario.Stream{Steps: []scenario.Step{
				{Rate: *rate(50, time.Second), For: dur(time.Second)},
				{Rate: *rate(0, time.Second), For: dur(time.Second)},
				{Rate: *rate(100, time.Second), For: dur(time.Second)},
			}},
			dur: 3 * time.Second, total: 150,
			at: map[uint64]time.Duration{
				0: 0, 49: 980 * time.Millisecond,
				50: 2 * time.Second, 149: 2990 * time.Millisecond,
			},
			perSec:  []uint64{50, 0, 100},
			maxSkew: time.Microsecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newSchedule(tc.stream, tc.dur)
			if err != nil {
				t.Fatal(err)
			}
			if s.Total() != tc.total {
				t.Fatalf("total = %d, want %d", s.Total(), tc.total)
			}
			for n, want := range tc.at {
				if got := s.At(n); absDur(got-want) > tc.maxSkew {
					t.Errorf("At(%d) = %s, want %s", n, got, want)
				}
			}
			for sec, want := range tc.perSec {
				from, to := time.Duration(sec)*time.Second, time.Duration(sec+1)*time.Second
				if got := s.Count(to) - s.Count(from); got != want {
					t.Errorf("second %d: %d hits due, want %d", sec, got, want)
				}
			}
			// The pacer vegeta runs fires exactly at At(n), and stops after Total.
			fires := firesOf(t, s.Pacer(), int(tc.total)+10)
			if uint64(len(fires)) != tc.total {
				t.Fatalf("pacer fired %d hits, want %d", len(fires), tc.total)
			}
			for n, f := range fires {
				if f != s.At(uint64(n)) {
					t.Fatalf("hit %d fired at %s, schedule says %s", n, f, s.At(uint64(n)))
				}
			}
			// At is increasing and Count inverts it.
			for n := uint64(1); n < s.Total(); n++ {
				if s.At(n) < s.At(n-1) {
					t.Fatalf("At not monotonic at %d", n)
				}
				if c := s.Count(s.At(n)); c != n {
					t.Fatalf("Count(At(%d)) = %d", n, c)
				}
			}
		})
	}
}

func TestScheduleRejects(t *testing.T) {
	tests := []struct {
		name string
		st   scenario.Stream
	}{
		{"none", scenario.Stream{}},
		{"two", scenario.Stream{Rate: rate(1, time.Second), Ramp: &scenario.Ramp{}}},
		{"zero ramp", scenario.Stream{Ramp: &scenario.Ramp{}}},
		{"rate 0 without maxWorkers", scenario.Stream{Rate: rate(0, time.Second)}},
		{"step without for", scenario.Stream{Steps: []scenario.Step{{Rate: *rate(1, time.Second)}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newSchedule(tc.st, time.Second); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestConstantMatchesVegeta(t *testing.T) {
	// The constant schedule's At(n) is exactly when vegeta.ConstantPacer fires hit n.
	for _, r := range []scenario.Rate{{Freq: 2800, Per: time.Second}, {Freq: 1400, Per: time.Second}, {Freq: 150, Per: time.Second}, {Freq: 7, Per: 3 * time.Second}} {
		s, err := newConstant(r, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		raw := firesOf(t, limitPacer{inner: vegeta.ConstantPacer{Freq: r.Freq, Per: r.Per}, total: s.Total()}, math.MaxInt32)
		for n, f := range raw {
			// vegeta alone fires one interval later; the schedule's pacer shifts it.
			if f-s.interval != s.At(uint64(n)) {
				t.Fatalf("%s: hit %d: vegeta fires at %s, schedule says %s", r, n, f, s.At(uint64(n)))
			}
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
