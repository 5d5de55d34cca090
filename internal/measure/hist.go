package measure

import (
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Hist is a histogram of durations in µs with one geometry
// (1 µs .. 120 s, 3 significant figures), held in one of two forms:
//
//   - dense: an array of every bucket (about 147 KB), constant-time to
//     record into; what a second that is still receiving results uses;
//   - packed: only the populated buckets (a few KB for a second of load:
//     it grows with the number of distinct values, not with the count);
//     what closed seconds use, so a run's series of an hour of seconds
//     fits in tens of MB instead of GBs when it is judged.
//
// Both forms answer the same queries with the same results (same bucket
// edges, same percentile rule). An empty Hist holds neither form; the
// first Record or Merge allocates a dense one, unless [Hist.Pack] made it
// packed. Read methods treat a nil *Hist as empty. Not safe for concurrent
// use.
type Hist struct {
	dense  *hdrhistogram.Histogram
	packed *hdrhistogram.PackedHistogram
}

// NewHist returns an empty histogram (no memory for buckets until the
// first value).
func NewHist() *Hist { return &Hist{} }

// clampMicros converts d to whole µs within the histogram's range.
func clampMicros(d time.Duration) int64 {
	v := d.Microseconds()
	if v < histMin {
		v = histMin
	}
	if v > histMax {
		v = histMax
	}
	return v
}

// Record adds d, clamped to 1 µs .. 120 s.
func (h *Hist) Record(d time.Duration) {
	v := clampMicros(d)
	if h.packed != nil {
		_ = h.packed.RecordValue(v)
		return
	}
	if h.dense == nil {
		h.dense = newDense()
	}
	_ = h.dense.RecordValue(v)
}

// TotalCount is the number of values recorded; 0 for a nil or empty Hist.
func (h *Hist) TotalCount() int64 {
	switch {
	case h == nil:
		return 0
	case h.packed != nil:
		return h.packed.TotalCount()
	case h.dense != nil:
		return h.dense.TotalCount()
	}
	return 0
}

// Quantile returns the q-th percentile (q in 0..100; 100 is the maximum)
// as a duration at HDR resolution; 0 for a nil or empty Hist.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.TotalCount() == 0 {
		return 0
	}
	var v int64
	if h.packed != nil {
		v = h.packed.ValueAtPercentile(q)
	} else {
		v = h.dense.ValueAtQuantile(q)
	}
	return time.Duration(v) * time.Microsecond
}

// Max returns the largest value recorded (the highest value equivalent to
// it at HDR resolution); 0 for a nil or empty Hist.
func (h *Hist) Max() time.Duration {
	if h.TotalCount() == 0 {
		return 0
	}
	var v int64
	if h.packed != nil {
		v = h.packed.Max()
	} else {
		v = h.dense.Max()
	}
	return time.Duration(v) * time.Microsecond
}

// Merge adds o's values into h and returns how many fell outside h's
// range (never any between two Hists: they share one geometry). A packed h
// stays packed; an empty or dense one is dense afterwards (merging many
// seconds into a window is fastest into a dense array). A nil or empty o
// adds nothing.
func (h *Hist) Merge(o *Hist) (dropped int64) {
	if o.TotalCount() == 0 || h == o {
		return 0
	}
	if h.packed != nil {
		if o.packed != nil {
			return h.packed.Merge(o.packed)
		}
		return h.packed.MergeFrom(o.dense)
	}
	if h.dense == nil {
		h.dense = newDense()
	}
	if o.packed != nil {
		return o.packed.MergeInto(h.dense)
	}
	return h.dense.Merge(o.dense)
}

// Pack turns h into its packed form in place (a no-op when it already is;
// an empty h stays empty and records densely again).
func (h *Hist) Pack() {
	if h.dense == nil {
		return
	}
	h.packed, h.dense = h.PackedCopy().packed, nil
}

// PackedCopy returns an independent packed copy of h (an empty Hist when h
// is nil or empty); h is not changed.
func (h *Hist) PackedCopy() *Hist {
	switch {
	case h.TotalCount() == 0:
		return &Hist{}
	case h.packed != nil:
		return &Hist{packed: h.packed.Clone()}
	}
	p := newPacked()
	p.MergeFrom(h.dense)
	p.Compact()
	return &Hist{packed: p}
}

// Packed reports whether h holds the packed form.
func (h *Hist) Packed() bool { return h != nil && h.packed != nil }

// Reset empties h, keeping a dense array for reuse (a packed form is
// dropped).
func (h *Hist) Reset() {
	h.packed = nil
	if h.dense != nil {
		h.dense.Reset()
	}
}

// Clone returns an independent copy of h in the same form; a nil h gives
// an empty Hist.
func (h *Hist) Clone() *Hist {
	c := &Hist{}
	if h == nil {
		return c
	}
	if h.packed != nil {
		c.packed = h.packed.Clone()
	}
	if h.dense != nil {
		c.dense = h.dense.Clone()
	}
	return c
}

// Size is an estimate of h's bucket storage in bytes (0 when empty).
func (h *Hist) Size() int {
	switch {
	case h == nil:
		return 0
	case h.packed != nil:
		return h.packed.GetMemorySize()
	case h.dense != nil:
		return h.dense.ByteSize()
	}
	return 0
}

// Encode returns h in the HdrHistogram V2 compressed encoding, base64
// (values in µs; both forms write the same bytes for the same values); ""
// for a nil or empty Hist. Errors come from the encoder, wrapped.
func (h *Hist) Encode() (string, error) {
	if h.TotalCount() == 0 {
		return "", nil
	}
	var (
		b   []byte
		err error
	)
	if h.packed != nil {
		b, err = h.packed.Encode()
	} else {
		b, err = h.dense.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	}
	if err != nil {
		return "", fmt.Errorf("encode histogram: %w", err)
	}
	return string(b), nil
}

// DecodeHist reads a histogram written by [Hist.Encode] (or by any V2
// compressed HdrHistogram encoder) in packed form; "" gives an empty Hist.
// A histogram of another geometry is re-bucketed into drill's. Errors: the
// text is not a V2 encoding, or it holds values outside 1 µs .. 120 s.
func DecodeHist(s string) (*Hist, error) {
	if s == "" {
		return &Hist{}, nil
	}
	d, err := hdrhistogram.DecodePacked([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	if d.TotalCount() == 0 {
		return &Hist{}, nil
	}
	if d.LowestTrackableValue() != histMin || d.HighestTrackableValue() != histMax || d.SignificantFigures() != histSigFigs {
		p := newPacked()
		if dropped := p.Merge(d); dropped > 0 {
			return nil, fmt.Errorf("decode histogram: %d values outside 1µs..120s", dropped)
		}
		d = p
	}
	d.Compact()
	return &Hist{packed: d}, nil
}
