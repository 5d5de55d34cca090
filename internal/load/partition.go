package load

import (
	"errors"
	"fmt"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Partition makes an engine one of Count workers that share every stream's
// schedule (see [Options.Partition]). The zero value (and Count 1) is the
// whole schedule in one process.
type Partition struct {
	// Index is this worker's index, 0 <= Index < Count.
	Index int
	// Count is the number of workers; 0 or 1: no partition.
	Count int
}

// Active reports whether p splits the schedule (Count > 1).
func (p Partition) Active() bool { return p.Count > 1 }

// Validate returns an error when Index is outside 0..Count-1 or Count is
// negative.
func (p Partition) Validate() error {
	if p.Count < 0 {
		return fmt.Errorf("partition: worker count %d must not be negative", p.Count)
	}
	if p.Count > 1 && (p.Index < 0 || p.Index >= p.Count) {
		return fmt.Errorf("partition: worker index %d must be within 0..%d", p.Index, p.Count-1)
	}
	if p.Count <= 1 && p.Index != 0 {
		return fmt.Errorf("partition: worker index %d without a worker count above 1", p.Index)
	}
	return nil
}

// Global is the sequence number in the whole schedule of this worker's
// local hit k: Index + k·Count.
func (p Partition) Global(k uint64) uint64 {
	if !p.Active() {
		return k
	}
	return uint64(p.Index) + k*uint64(p.Count)
}

// Shares counts the hits among the first n of the whole schedule whose
// sequence number is Index mod Count (this worker's share of them).
func (p Partition) Shares(n uint64) uint64 {
	if !p.Active() {
		return n
	}
	i, c := uint64(p.Index), uint64(p.Count)
	if n <= i {
		return 0
	}
	return (n-i-1)/c + 1
}

// partSchedule is worker Index of Count's share of a whole schedule: its
// local hit k is the whole schedule's hit Index + k·Count, due at the same
// time.
type partSchedule struct {
	whole schedule
	p     Partition
}

// errPartitionNeedsRate: the as-fast-as-possible mode has no schedule to share.
var errPartitionNeedsRate = errors.New("a stream shared by several workers needs a rate, ramp or steps (rate 0, as fast as possible, has no schedule to share)")

func newPartSchedule(whole schedule, p Partition) (schedule, error) {
	if whole == nil {
		return nil, errPartitionNeedsRate
	}
	if !p.Active() {
		return whole, nil
	}
	return &partSchedule{whole: whole, p: p}, nil
}

func (s *partSchedule) At(k uint64) time.Duration { return s.whole.At(s.p.Global(k)) }

func (s *partSchedule) Count(t time.Duration) uint64 { return s.p.Shares(s.whole.Count(t)) }

func (s *partSchedule) Total() uint64 { return s.p.Shares(s.whole.Total()) }

func (s *partSchedule) Rate(t time.Duration) float64 { return s.whole.Rate(t) / float64(s.p.Count) }

func (s *partSchedule) Pacer() vegeta.Pacer { return schedulePacer{s: s} }

// offsetPacer runs inner as if its attack had begun offset earlier: an
// attack that begins offset after the schedule's anchor sends every hit at
// its time from the anchor (hits already due go at once).
type offsetPacer struct {
	inner  vegeta.Pacer
	offset time.Duration
}

func (p offsetPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return p.inner.Pace(elapsed+p.offset, hits)
}

func (p offsetPacer) Rate(elapsed time.Duration) float64 { return p.inner.Rate(elapsed + p.offset) }
