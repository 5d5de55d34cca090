package event

import (
	"testing"
	"time"
)

// TestFromMonotonic: a CLOCK_MONOTONIC reading maps between the clock's
// readings taken just before and just after it; one taken 50 ms earlier
// maps 50 ms earlier; 0 maps to now.
func TestFromMonotonic(t *testing.T) {
	const jitter = 20 * time.Millisecond // a preemption between the two clocks' reads
	c := NewClockAt(time.Now().Add(-time.Second))
	before := c.Now()
	ns := Monotonic()
	after := c.Now()
	if ns == 0 {
		t.Fatal("no CLOCK_MONOTONIC")
	}
	got := c.FromMonotonic(ns)
	if got < before-jitter || got > after+jitter {
		t.Fatalf("a reading taken between %s and %s maps to %s", before, after, got)
	}
	earlier := c.FromMonotonic(ns - int64(50*time.Millisecond))
	if d := got - earlier; d < 50*time.Millisecond-2*jitter || d > 50*time.Millisecond+2*jitter {
		t.Fatalf("a reading 50 ms earlier maps %s earlier", d)
	}
	if z := c.FromMonotonic(0); z < after {
		t.Fatalf("0 maps to %s, before now (%s)", z, after)
	}
}
