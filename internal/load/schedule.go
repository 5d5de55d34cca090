package load

import (
	"fmt"
	"math"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/scenario"
)

// schedule is a stream's open-model send schedule: hit n (0-based) is due
// at At(n) after the stream began, whatever happened to earlier hits. It
// is the integral H of the rate: At(n) is the first instant at which H
// exceeds n, so hit 0 goes at t=0 and the hits due in [a, b) number
// about H(b)−H(a); the hits of a constant rate F/s over whole seconds fall
// exactly F into each second.
type schedule interface {
	// At is the intended send time of hit n, relative to the stream's start.
	At(n uint64) time.Duration
	// Count is the number of hits due strictly before t (<= Total()).
	Count(t time.Duration) uint64
	// Total is the number of hits over the whole duration.
	Total() uint64
	// Pacer paces vegeta's attack on exactly these times and stops after Total hits.
	Pacer() vegeta.Pacer
	// Rate is the intended rate at t in req/s.
	Rate(t time.Duration) float64
}

// constantSchedule is vegeta.ConstantPacer shifted by one interval
// (vegeta fires hit n at (n+1)·interval; here hit n is due at n·interval,
// interval = Per/Freq in whole nanoseconds).
type constantSchedule struct {
	rate     vegeta.ConstantPacer
	interval time.Duration
	total    uint64
}

func newConstant(r scenario.Rate, d time.Duration) (*constantSchedule, error) {
	if r.Freq <= 0 || r.Per <= 0 {
		return nil, fmt.Errorf("rate %s must be above zero", r)
	}
	iv := r.Per / time.Duration(r.Freq)
	if iv <= 0 {
		return nil, fmt.Errorf("rate %s is too high (interval below 1ns)", r)
	}
	return &constantSchedule{
		rate:     vegeta.ConstantPacer{Freq: r.Freq, Per: r.Per},
		interval: iv,
		// Freq·d/Per whole hits (computed in floating point: d·Freq can overflow).
		total: uint64(math.Floor(float64(r.Freq)*d.Seconds()/r.Per.Seconds() + 1e-9)),
	}, nil
}

func (c *constantSchedule) At(n uint64) time.Duration { return time.Duration(n) * c.interval }

func (c *constantSchedule) Count(t time.Duration) uint64 {
	if t <= 0 {
		return 0
	}
	n := uint64((t-1)/c.interval) + 1 // hits with n·iv < t
	return min(n, c.total)
}

func (c *constantSchedule) Total() uint64 { return c.total }

func (c *constantSchedule) Rate(time.Duration) float64 { return c.rate.Rate(0) }

// Pacer is vegeta's own ConstantPacer, one interval ahead, stopped after
// Total hits.
func (c *constantSchedule) Pacer() vegeta.Pacer {
	return limitPacer{inner: c.rate, total: c.total, shift: c.interval}
}

// limitPacer runs inner shift ahead and stops it after total hits (so no
// hit due inside the duration is lost when the pacer loop runs late at
// the end).
type limitPacer struct {
	inner vegeta.Pacer
	total uint64
	shift time.Duration
}

func (p limitPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= p.total {
		return 0, true
	}
	return p.inner.Pace(elapsed+p.shift, hits)
}

func (p limitPacer) Rate(elapsed time.Duration) float64 { return p.inner.Rate(elapsed) }

// segment is a stretch of linearly changing rate: from r0 to r1 req/s over
// dur, starting at t0 with c0 hits already due.
type segment struct {
	t0, dur time.Duration
	r0, r1  float64
	c0      float64
}

// hits due within the segment after dt (integral of the rate).
func (s segment) hits(dt time.Duration) float64 {
	x := dt.Seconds()
	d := s.dur.Seconds()
	return s.r0*x + (s.r1-s.r0)*x*x/(2*d)
}

// inverse returns dt at which the segment's integral reaches m (0 <= m <=
// hits(dur)): the root of a·x² + b·x − m = 0 in its stable form.
func (s segment) inverse(m float64) time.Duration {
	if m <= 0 {
		return 0
	}
	a := (s.r1 - s.r0) / (2 * s.dur.Seconds())
	b := s.r0
	disc := b*b + 4*a*m
	if disc < 0 {
		disc = 0
	}
	den := b + math.Sqrt(disc)
	if den <= 0 {
		return s.dur
	}
	x := 2 * m / den
	return min(time.Duration(math.Ceil(x*1e9)), s.dur)
}

// pieceSchedule is a piecewise linear rate: one segment for a ramp, one
// flat segment per step.
type pieceSchedule struct {
	segs  []segment
	total uint64
	end   time.Duration
}

func newPieces(segs []segment) (*pieceSchedule, error) {
	p := &pieceSchedule{}
	var t time.Duration
	var c float64
	for _, s := range segs {
		if s.dur <= 0 {
			return nil, fmt.Errorf("a rate segment needs a positive duration")
		}
		if s.r0 < 0 || s.r1 < 0 {
			return nil, fmt.Errorf("rates must not be negative")
		}
		s.t0, s.c0 = t, c
		p.segs = append(p.segs, s)
		t += s.dur
		c += s.hits(s.dur)
	}
	p.end = t
	p.total = uint64(math.Ceil(c - 1e-9)) // hits n < H(end)
	return p, nil
}

func (p *pieceSchedule) integral(t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	for _, s := range p.segs {
		if t <= s.t0+s.dur {
			return s.c0 + s.hits(t-s.t0)
		}
	}
	last := p.segs[len(p.segs)-1]
	return last.c0 + last.hits(last.dur)
}

func (p *pieceSchedule) At(n uint64) time.Duration {
	m := float64(n)
	for _, s := range p.segs {
		// The first segment whose integral goes beyond n (so a zero-rate
		// step never gets a hit at its start).
		if s.c0+s.hits(s.dur) > m+1e-9 {
			return s.t0 + s.inverse(m-s.c0)
		}
	}
	return p.end
}

func (p *pieceSchedule) Count(t time.Duration) uint64 {
	// Hits with At(n) < t. Start from the integral's estimate and correct
	// with At so Count and At agree exactly.
	if t <= 0 {
		return 0
	}
	n := uint64(math.Max(0, math.Ceil(p.integral(t))-1))
	n = min(n, p.total)
	for n > 0 && p.At(n-1) >= t {
		n--
	}
	for n < p.total && p.At(n) < t {
		n++
	}
	return n
}

func (p *pieceSchedule) Total() uint64 { return p.total }

func (p *pieceSchedule) Rate(t time.Duration) float64 {
	for _, s := range p.segs {
		if t < s.t0+s.dur {
			return s.r0 + (s.r1-s.r0)*(t-s.t0).Seconds()/s.dur.Seconds()
		}
	}
	return 0
}

func (p *pieceSchedule) Pacer() vegeta.Pacer { return schedulePacer{s: p} }

// schedulePacer fires hit n at exactly s.At(n) (or at once when late) and
// stops after s.Total() hits.
type schedulePacer struct{ s schedule }

func (p schedulePacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= p.s.Total() {
		return 0, true
	}
	wait := p.s.At(hits) - elapsed
	if wait < 0 {
		wait = 0
	}
	return wait, false
}

func (p schedulePacer) Rate(elapsed time.Duration) float64 { return p.s.Rate(elapsed) }

// newSchedule builds the stream's schedule; nil (with no error) for the
// "as fast as MaxWorkers allow" mode, which a rate of 0/s selects.
func newSchedule(st scenario.Stream, dur time.Duration) (schedule, error) {
	n := 0
	if st.Rate != nil {
		n++
	}
	if st.Ramp != nil {
		n++
	}
	if len(st.Steps) > 0 {
		n++
	}
	if n != 1 {
		return nil, fmt.Errorf("needs exactly one of rate, ramp or steps (has %d)", n)
	}
	switch {
	case st.Rate != nil:
		if st.Rate.Freq == 0 {
			if st.MaxWorkers <= 0 {
				return nil, fmt.Errorf("rate 0 (as fast as possible) needs maxWorkers")
			}
			return nil, nil
		}
		if dur <= 0 {
			return nil, fmt.Errorf("needs a positive duration")
		}
		return newConstant(*st.Rate, dur)
	case st.Ramp != nil:
		if dur <= 0 {
			return nil, fmt.Errorf("needs a positive duration")
		}
		from, to := st.Ramp.From.PerSecond(), st.Ramp.To.PerSecond()
		if from == 0 && to == 0 {
			return nil, fmt.Errorf("ramp from %s to %s sends nothing", st.Ramp.From, st.Ramp.To)
		}
		return newPieces([]segment{{dur: dur, r0: from, r1: to}})
	default:
		// Steps run back to back; a positive stream duration cuts them short.
		var segs []segment
		var at time.Duration
		for i, s := range st.Steps {
			if s.For.D() <= 0 {
				return nil, fmt.Errorf("steps[%d]: for must be positive", i)
			}
			d := s.For.D()
			if dur > 0 && at+d > dur {
				d = dur - at
			}
			if d <= 0 {
				break
			}
			r := s.Rate.PerSecond()
			segs = append(segs, segment{dur: d, r0: r, r1: r})
			at += d
		}
		return newPieces(segs)
	}
}
