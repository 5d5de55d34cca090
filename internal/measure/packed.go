package measure

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Packed is a closed [Bucket] in compact form: the same counters, with
// its histograms packed ([Hist.Pack]: their size grows with the number of
// distinct latency values, typically a few KB per second of load, instead
// of ~147 KB per dense histogram). The load engine packs each second once
// no more results can arrive for it, so its memory stays nearly flat over
// a long run. Not safe for concurrent use.
type Packed struct {
	b Bucket
}

// newPacked returns an empty sparse histogram with newDense's geometry.
func newPacked() *hdrhistogram.PackedHistogram {
	return hdrhistogram.NewPacked(histMin, histMax, histSigFigs)
}

// Pack returns b in compact form. b is not modified.
func Pack(b *Bucket) *Packed {
	p := &Packed{b: Bucket{Start: b.Start, Width: b.Width,
		Latency: b.Latency.PackedCopy(), Lag: b.Lag.PackedCopy(), Shed: b.Shed.PackedCopy(), Success: b.Success.PackedCopy()}}
	p.b.mergeCounts(b)
	return p
}

// MergeInto adds p's counts and histograms into b (b's Start and Width are
// kept; its histograms are allocated when nil).
func (p *Packed) MergeInto(b *Bucket) { b.Merge(&p.b) }

// Late is p's count of requests whose dispatch lag exceeded the stream's
// budget ([Bucket.Late]).
func (p *Packed) Late() int64 { return p.b.Late }

// Unpack returns p as a new Bucket (its histograms dense).
func (p *Packed) Unpack() *Bucket {
	b := NewBucket(p.b.Start, p.b.Width)
	p.MergeInto(b)
	return b
}

// Bucket returns a copy of p as a Bucket whose histograms stay packed (a
// few KB, where [Packed.Unpack]'s dense ones take ~450 KB): for a closed
// second that is kept, read or merged into, not recorded into at speed.
func (p *Packed) Bucket() *Bucket { return p.b.Clone() }

// Size is an estimate of p's memory in bytes (histogram storage only).
func (p *Packed) Size() int {
	return p.b.Latency.Size() + p.b.Lag.Size() + p.b.Shed.Size() + p.b.Success.Size()
}

// Pack turns b's histograms into their packed form in place ([Hist.Pack]):
// for a bucket that will receive no more values but is kept.
func (b *Bucket) Pack() {
	for _, h := range []*Hist{b.Latency, b.Lag, b.Shed, b.Success} {
		if h != nil {
			h.Pack()
		}
	}
}

// Clone returns a deep copy of b (nil histograms stay nil).
func (b *Bucket) Clone() *Bucket {
	c := *b
	c.Codes = make(map[int]int64, len(b.Codes))
	for k, v := range b.Codes {
		c.Codes[k] = v
	}
	c.Errors = make(map[string]int64, len(b.Errors))
	for k, v := range b.Errors {
		c.Errors[k] = v
	}
	if b.ServiceAnswers != nil {
		c.ServiceAnswers = make(map[int]int64, len(b.ServiceAnswers))
		for k, v := range b.ServiceAnswers {
			c.ServiceAnswers[k] = v
		}
	}
	c.Checks = cloneChecks(b.Checks)
	if b.Latency != nil {
		c.Latency = b.Latency.Clone()
	}
	if b.Lag != nil {
		c.Lag = b.Lag.Clone()
	}
	if b.Shed != nil {
		c.Shed = b.Shed.Clone()
	}
	if b.Success != nil {
		c.Success = b.Success.Clone()
	}
	return &c
}

// Reset empties b in place (histograms are kept and cleared) and moves it
// to [start, start+width).
func (b *Bucket) Reset(start, width time.Duration) {
	lat, lag, shed, ok := b.Latency, b.Lag, b.Shed, b.Success
	codes, errs, svc, checks := b.Codes, b.Errors, b.ServiceAnswers, b.Checks
	*b = Bucket{Start: start, Width: width, Latency: lat, Lag: lag, Shed: shed, Success: ok, Codes: codes, Errors: errs, ServiceAnswers: svc, Checks: checks}
	for _, h := range []**Hist{&b.Latency, &b.Lag, &b.Shed, &b.Success} {
		if *h == nil {
			*h = NewHist()
		} else {
			(*h).Reset()
		}
	}
	if b.Codes == nil {
		b.Codes = map[int]int64{}
	}
	clear(b.Codes)
	if b.Errors == nil {
		b.Errors = map[string]int64{}
	}
	clear(b.Errors)
	clear(b.ServiceAnswers)
	clear(b.Checks)
}
