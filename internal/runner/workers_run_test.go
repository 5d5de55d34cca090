package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

// secondsTo records the seconds handed to it, or fails with err.
type secondsTo struct {
	got []string
	err error
}

func (s *secondsTo) WriteSecond(stream string, b *measure.Bucket) error {
	s.got = append(s.got, stream)
	return s.err
}

// TestWorkersLoadLive: a workers run's live figures come from its last
// merged seconds (at most the window asked for), its totals from every
// second merged, and each stream's state from the run's clock; every
// second goes on to the journal, whose first error SecondsErr keeps.
func TestWorkersLoadLive(t *testing.T) {
	streams := []scenario.Stream{
		{Name: "orders", Duration: scenario.Duration{Duration: 20 * time.Second}},
		{Name: "tax", Start: scenario.Duration{Duration: time.Hour}, Duration: scenario.Duration{Duration: time.Second}},
	}
	sink := &secondsTo{}
	wl := &workersLoad{
		streams: streams, clock: event.NewClockAt(time.Now().Add(-12 * time.Second)), out: sink,
		recent: map[string][]*measure.Bucket{}, sent: map[string]int64{}, late: map[string]int64{},
	}
	for sec := range 12 {
		b := measure.NewBucket(time.Duration(sec)*time.Second, time.Second)
		b.Intended, b.Requests, b.OK, b.Late = 100, 100, 99, 1
		b.Codes[200], b.Codes[503] = 99, 1
		for i := range 100 {
			b.Latency.Record(time.Duration(sec+1)*time.Millisecond + time.Duration(i)*time.Microsecond)
		}
		b.Shed.Record(time.Millisecond)
		if err := wl.WriteSecond("orders", b); err != nil {
			t.Fatal(err)
		}
	}
	live := wl.Live(5 * time.Second)
	if len(live) != 2 {
		t.Fatalf("%d streams live, want 2", len(live))
	}
	o, x := live[0], live[1]
	if o.Stream != "orders" || o.State != "running" || x.Stream != "tax" || x.State != "pending" {
		t.Errorf("states: %s %s, %s %s; want orders running, tax pending", o.Stream, o.State, x.Stream, x.State)
	}
	if o.Window != 5*time.Second || o.Requests != 500 || o.IntendedRate != 100 || o.AchievedRate != 100 {
		t.Errorf("orders over 5 s: window %s, requests %d, intended %.1f/s, achieved %.1f/s; want 5s, 500, 100, 100", o.Window, o.Requests, o.IntendedRate, o.AchievedRate)
	}
	if o.Failures != 5 || o.Shed != 5 {
		t.Errorf("orders over 5 s: %d failures, %d shed; want 5 and 5 (one 503 a second)", o.Failures, o.Shed)
	}
	// The last 5 seconds are t=7..11: latencies 8-12.1 ms, p99 in the last one.
	if o.P99 < 12*time.Millisecond || o.P99 > 12100*time.Microsecond {
		t.Errorf("orders p99 %s, want within the last second's 12-12.1 ms", o.P99)
	}
	if o.Sent != 1200 || o.Late != 12 {
		t.Errorf("orders totals: sent %d, late %d; want 1200 and 12 (every second merged)", o.Sent, o.Late)
	}
	if len(sink.got) != 12 {
		t.Errorf("the journal got %d seconds, want 12", len(sink.got))
	}
	if n := len(wl.recent["orders"]); n != liveSeconds {
		t.Errorf("%d seconds kept for the live figures, want %d", n, liveSeconds)
	}
	if err := wl.SecondsErr(); err != nil {
		t.Errorf("SecondsErr %v before any failure", err)
	}
	sink.err = errors.New("disk full")
	_ = wl.WriteSecond("orders", measure.NewBucket(12*time.Second, time.Second))
	_ = wl.WriteSecond("orders", measure.NewBucket(13*time.Second, time.Second))
	if err := wl.SecondsErr(); err == nil || err.Error() != "disk full" {
		t.Errorf("SecondsErr %v, want the journal's first error", err)
	}
}
