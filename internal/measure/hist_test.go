package measure

import (
	"math/rand/v2"
	"testing"
	"time"
)

// sample records n latencies of a seeds-like spread (0.5-50 ms, a tail to
// 2 s) into h, the same sequence for the same seed.
func sample(h *Hist, n int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < n; i++ {
		d := 500*time.Microsecond + time.Duration(r.Int64N(int64(50*time.Millisecond)))
		if i%200 == 0 {
			d = time.Duration(r.Int64N(int64(2 * time.Second)))
		}
		h.Record(d)
	}
}

// TestHistFormsAgree: a packed Hist answers every query exactly as the
// dense one it was packed from, encodes to the same bytes, and merging in
// any combination of forms gives the same histogram.
func TestHistFormsAgree(t *testing.T) {
	dense := NewHist()
	sample(dense, 5000, 1)
	packed := dense.Clone()
	packed.Pack()
	if !packed.Packed() || dense.Packed() {
		t.Fatalf("forms: packed %v dense %v", packed.Packed(), dense.Packed())
	}
	if packed.Size() >= dense.Size()/4 {
		t.Fatalf("packed %d bytes, dense %d: packing saved little", packed.Size(), dense.Size())
	}
	check := func(what string, got, want *Hist) {
		t.Helper()
		if got.TotalCount() != want.TotalCount() {
			t.Fatalf("%s: count %d, want %d", what, got.TotalCount(), want.TotalCount())
		}
		for _, q := range []float64{0, 1, 50, 90, 99, 99.9, 100} {
			if g, w := got.Quantile(q), want.Quantile(q); g != w {
				t.Fatalf("%s: p%v = %s, want %s", what, q, g, w)
			}
		}
		if got.Max() != want.Max() {
			t.Fatalf("%s: max %s, want %s", what, got.Max(), want.Max())
		}
	}
	check("packed", packed, dense)
	de, err := dense.Encode()
	if err != nil {
		t.Fatal(err)
	}
	pe, err := packed.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if de != pe {
		t.Fatalf("encodings differ: dense %d bytes, packed %d", len(de), len(pe))
	}
	back, err := DecodeHist(pe)
	if err != nil {
		t.Fatal(err)
	}
	check("decoded", back, dense)
	if !back.Packed() {
		t.Fatal("a decoded Hist is not packed")
	}

	other := NewHist()
	sample(other, 3000, 2)
	want := dense.Clone()
	want.Merge(other)
	otherPacked := other.Clone()
	otherPacked.Pack()
	for _, tc := range []struct {
		name     string
		dst, src *Hist
	}{
		{"dense+dense", dense.Clone(), other},
		{"dense+packed", dense.Clone(), otherPacked},
		{"packed+dense", packed.Clone(), other},
		{"packed+packed", packed.Clone(), otherPacked},
		{"empty+packed", NewHist(), want.PackedCopy()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if dropped := tc.dst.Merge(tc.src); dropped != 0 {
				t.Fatalf("dropped %d", dropped)
			}
			check(tc.name, tc.dst, want)
		})
	}
}

// TestHistEmpty: nil and empty Hists read as empty in either form, and an
// empty Hist packs to nothing and records again.
func TestHistEmpty(t *testing.T) {
	var nilHist *Hist
	for _, h := range []*Hist{nilHist, NewHist(), NewHist().PackedCopy()} {
		if h.TotalCount() != 0 || h.Quantile(99) != 0 || h.Max() != 0 || h.Size() != 0 {
			t.Fatalf("empty hist: count %d p99 %s max %s size %d", h.TotalCount(), h.Quantile(99), h.Max(), h.Size())
		}
		if s, err := h.Encode(); s != "" || err != nil {
			t.Fatalf("empty encode = %q, %v", s, err)
		}
	}
	h := NewHist()
	h.Pack()
	h.Record(3 * time.Millisecond)
	if h.TotalCount() != 1 || h.Quantile(50) < 3*time.Millisecond {
		t.Fatalf("after pack of empty then record: count %d p50 %s", h.TotalCount(), h.Quantile(50))
	}
	p := h.PackedCopy()
	p.Record(4 * time.Millisecond) // a packed Hist records in place
	if p.TotalCount() != 2 || !p.Packed() {
		t.Fatalf("packed record: count %d packed %v", p.TotalCount(), p.Packed())
	}
	p.Reset()
	if p.TotalCount() != 0 || p.Packed() {
		t.Fatalf("after reset: count %d packed %v", p.TotalCount(), p.Packed())
	}
}

// TestDecodeHistClamps: values are recorded within 1 µs .. 120 s, so a
// round trip of extreme values keeps them in range.
func TestDecodeHistClamps(t *testing.T) {
	h := NewHist()
	h.Record(0)
	h.Record(time.Hour)
	s, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeHist(s)
	if err != nil {
		t.Fatal(err)
	}
	if back.TotalCount() != 2 || back.Max() < 119*time.Second || back.Max() > 121*time.Second {
		t.Fatalf("count %d max %s", back.TotalCount(), back.Max())
	}
	if _, err := DecodeHist("not-base64!"); err == nil {
		t.Fatal("garbage decoded")
	}
}
