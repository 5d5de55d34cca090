package measure

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Packed is a closed [Bucket] in compact form: the same counters, with
// sparse HDR histograms ([hdrhistogram.PackedHistogram]) whose size grows
// with the number of distinct latency values (typically a few KB per
// second of load) instead of ~147 KB per dense histogram. The load engine
// packs each second once no more results can arrive for it, so its memory
// stays nearly flat over a long run. Not safe for concurrent use.
type Packed struct {
	counts             Bucket // Start, Width and the counters; no histograms
	latency, lag, shed *hdrhistogram.PackedHistogram
}

// newPacked returns an empty sparse histogram with NewHistogram's geometry.
func newPacked() *hdrhistogram.PackedHistogram {
	return hdrhistogram.NewPacked(histMin, histMax, histSigFigs)
}

// packHist copies a dense histogram into a compact sparse one; nil when h
// is nil or empty.
func packHist(h *hdrhistogram.Histogram) *hdrhistogram.PackedHistogram {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	p := newPacked()
	p.MergeFrom(h)
	p.Compact()
	return p
}

// Pack returns b in compact form. b is not modified.
func Pack(b *Bucket) *Packed {
	p := &Packed{
		counts:  Bucket{Start: b.Start, Width: b.Width},
		latency: packHist(b.Latency), lag: packHist(b.Lag), shed: packHist(b.Shed),
	}
	p.counts.mergeCounts(b)
	return p
}

// MergeInto adds p's counts into b (b's Start and Width are kept); b's
// histograms are allocated when nil.
func (p *Packed) MergeInto(b *Bucket) {
	b.mergeCounts(&p.counts)
	mergePacked(&b.Latency, p.latency)
	mergePacked(&b.Lag, p.lag)
	mergePacked(&b.Shed, p.shed)
}

func mergePacked(dst **hdrhistogram.Histogram, src *hdrhistogram.PackedHistogram) {
	if src == nil || src.TotalCount() == 0 {
		return
	}
	if *dst == nil {
		*dst = NewHistogram()
	}
	src.MergeInto(*dst)
}

// Late is p's count of requests whose dispatch lag exceeded the stream's
// budget ([Bucket.Late]).
func (p *Packed) Late() int64 { return p.counts.Late }

// Unpack returns p as a new dense Bucket.
func (p *Packed) Unpack() *Bucket {
	b := NewBucket(p.counts.Start, p.counts.Width)
	p.MergeInto(b)
	return b
}

// Size is an estimate of p's memory in bytes (histogram storage only).
func (p *Packed) Size() int {
	n := 0
	for _, h := range []*hdrhistogram.PackedHistogram{p.latency, p.lag, p.shed} {
		if h != nil {
			n += h.GetMemorySize()
		}
	}
	return n
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
	if b.Latency != nil {
		c.Latency = b.Latency.Clone()
	}
	if b.Lag != nil {
		c.Lag = b.Lag.Clone()
	}
	if b.Shed != nil {
		c.Shed = b.Shed.Clone()
	}
	return &c
}

// Reset empties b in place (histograms are kept and cleared) and moves it
// to [start, start+width).
func (b *Bucket) Reset(start, width time.Duration) {
	lat, lag, shed := b.Latency, b.Lag, b.Shed
	codes, errs := b.Codes, b.Errors
	*b = Bucket{Start: start, Width: width, Latency: lat, Lag: lag, Shed: shed, Codes: codes, Errors: errs}
	for _, h := range []**hdrhistogram.Histogram{&b.Latency, &b.Lag, &b.Shed} {
		if *h == nil {
			*h = NewHistogram()
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
}
