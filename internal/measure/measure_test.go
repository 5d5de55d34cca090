package measure

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// fill records n latencies of d and one status code into b.
func fill(b *Bucket, n int, d time.Duration, code int) {
	for i := 0; i < n; i++ {
		b.Requests++
		b.Intended++
		b.Codes[code]++
		if code < 400 {
			b.OK++
		}
		Record(b.Latency, d)
		Record(b.Lag, 100*time.Microsecond)
		if code == 503 || code == 429 {
			Record(b.Shed, d)
		}
	}
}

func TestWindowCutsOnBucketStarts(t *testing.T) {
	s := &Series{Stream: "orders"}
	for i := 0; i < 10; i++ {
		b := NewBucket(time.Duration(i)*time.Second, time.Second)
		lat := 10 * time.Millisecond
		if i >= 4 && i < 7 { // the "fault" seconds
			lat = 500 * time.Millisecond
		}
		fill(b, 100, lat, 200)
		s.Buckets = append(s.Buckets, b)
	}
	tests := []struct {
		name     string
		from, to time.Duration
		requests int64
		p99      time.Duration
	}{
		{"baseline", 0, 4 * time.Second, 400, 10 * time.Millisecond},
		{"fault", 4 * time.Second, 7 * time.Second, 300, 500 * time.Millisecond},
		{"recovery", 7 * time.Second, 10 * time.Second, 300, 10 * time.Millisecond},
		{"run", 0, 10 * time.Second, 1000, 500 * time.Millisecond},
		{"half second start belongs to next bucket", 3500 * time.Millisecond, 4 * time.Second, 0, 0},
		{"outside", 20 * time.Second, 30 * time.Second, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := s.Window(tc.from, tc.to)
			if w.Requests != tc.requests {
				t.Fatalf("requests = %d, want %d", w.Requests, tc.requests)
			}
			if got := w.Quantile(99); !near(got, tc.p99) {
				t.Fatalf("p99 = %s, want ~%s", got, tc.p99)
			}
			if w.Start != tc.from || w.Width != tc.to-tc.from {
				t.Fatalf("window span = %s+%s", w.Start, w.Width)
			}
		})
	}
	if got := s.Total().Requests; got != 1000 {
		t.Fatalf("total = %d", got)
	}
}

func near(got, want time.Duration) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= want/500+time.Microsecond // 3 significant figures
}

func TestMergeAddsEverything(t *testing.T) {
	a := NewBucket(0, time.Second)
	fill(a, 90, 5*time.Millisecond, 200)
	a.Errors[ErrTimeout] = 2
	a.Retries = 3
	b := NewBucket(time.Second, time.Second)
	fill(b, 10, 900*time.Millisecond, 503)
	b.ShedRetryAfter = 10
	b.Errors[ErrTimeout] = 1
	b.Errors[ErrRefused] = 4
	b.Late = 7
	b.BytesIn, b.BytesOut = 100, 50

	m := NewBucket(0, 2*time.Second)
	m.Merge(a)
	m.Merge(b)
	m.Merge(nil)
	if m.Requests != 100 || m.OK != 90 || m.Codes[503] != 10 || m.Errors[ErrTimeout] != 3 || m.Errors[ErrRefused] != 4 {
		t.Fatalf("counts: %+v", m)
	}
	if m.Late != 7 || m.Retries != 3 || m.ShedRetryAfter != 10 || m.BytesIn != 100 || m.BytesOut != 50 {
		t.Fatalf("counters: %+v", m)
	}
	if got := m.Latency.TotalCount(); got != 100 {
		t.Fatalf("latency count = %d", got)
	}
	if got := m.Quantile(50); !near(got, 5*time.Millisecond) {
		t.Fatalf("p50 = %s", got)
	}
	if got := m.Quantile(95); !near(got, 900*time.Millisecond) {
		t.Fatalf("p95 = %s", got)
	}
	if got := m.Shed.TotalCount(); got != 10 {
		t.Fatalf("shed = %d", got)
	}
	if got, want := m.Failures(), int64(10+3+4); got != want {
		t.Fatalf("failures = %d, want %d", got, want)
	}
	// A bucket with nil histograms and maps merges without panicking.
	m.Merge(&Bucket{Requests: 1})
	var z Bucket
	z.Merge(a)
	if z.Latency.TotalCount() != 90 {
		t.Fatalf("merge into zero bucket: %d", z.Latency.TotalCount())
	}
}

func TestPackRoundTrip(t *testing.T) {
	b := NewBucket(3*time.Second, time.Second)
	fill(b, 500, 2*time.Millisecond, 200)
	fill(b, 20, 40*time.Millisecond, 429)
	b.ShedRetryAfter = 20
	b.Errors[ErrReset] = 1
	p := Pack(b)
	u := p.Unpack()
	if !reflect.DeepEqual(counts(u.Latency), counts(b.Latency)) || !reflect.DeepEqual(counts(u.Lag), counts(b.Lag)) ||
		!reflect.DeepEqual(counts(u.Shed), counts(b.Shed)) {
		t.Fatal("histograms differ after pack/unpack")
	}
	if u.Requests != b.Requests || u.Codes[429] != 20 || u.Errors[ErrReset] != 1 || u.ShedRetryAfter != 20 || u.Start != b.Start {
		t.Fatalf("counters differ: %+v", u)
	}
	if p.Size() > 8<<10 {
		t.Fatalf("packed size %d bytes, want a few KB", p.Size())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	s := &Series{Stream: "card-auth"}
	for i := 0; i < 3; i++ {
		b := NewBucket(time.Duration(i)*time.Second, time.Second)
		fill(b, 1000, time.Duration(i+1)*time.Millisecond, 200)
		fill(b, 5, 3*time.Millisecond, 503)
		b.Errors[ErrTimeout] = int64(i)
		b.Late, b.Retries, b.BytesIn, b.BytesOut = 1, 2, 3, 4
		s.Buckets = append(s.Buckets, b)
	}
	s.Buckets = append(s.Buckets, NewBucket(3*time.Second, time.Second)) // empty
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 4000 {
		t.Fatalf("encoding is %d bytes for 4 buckets; want compact", len(data))
	}
	var back Series
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Stream != s.Stream || len(back.Buckets) != len(s.Buckets) {
		t.Fatalf("got %s with %d buckets", back.Stream, len(back.Buckets))
	}
	for i, b := range s.Buckets {
		g := back.Buckets[i]
		if !reflect.DeepEqual(counts(g.Latency), counts(b.Latency)) || !reflect.DeepEqual(counts(g.Lag), counts(b.Lag)) ||
			!reflect.DeepEqual(counts(g.Shed), counts(b.Shed)) {
			t.Fatalf("bucket %d: histograms differ", i)
		}
		if g.Start != b.Start || g.Width != b.Width || g.Requests != b.Requests || g.OK != b.OK ||
			g.Codes[503] != b.Codes[503] || g.Errors[ErrTimeout] != b.Errors[ErrTimeout] ||
			g.Late != b.Late || g.Retries != b.Retries || g.BytesIn != b.BytesIn || g.BytesOut != b.BytesOut {
			t.Fatalf("bucket %d differs: %+v vs %+v", i, g, b)
		}
	}
	if _, err := DecodeHist("not-base64!"); err == nil {
		t.Fatal("want an error for a corrupt histogram")
	}
}

// TestWindowFractionalEdges: a window an operator's action cut at a
// fraction of a second (a fault started at t=3.93 s, ended at t=7.2 s)
// takes only the seconds wholly inside it, so the baseline does not take
// in the fault's first requests nor the fault window its recovery's, and
// its span (for rates) is the seconds it holds.
func TestWindowFractionalEdges(t *testing.T) {
	s := &Series{Stream: "orders"}
	for i := 0; i < 10; i++ {
		b := NewBucket(time.Duration(i)*time.Second, time.Second)
		lat := 10 * time.Millisecond
		if i == 3 || (i >= 4 && i <= 7) { // second 3 holds the fault's start
			lat = 500 * time.Millisecond
		}
		fill(b, 100, lat, 200)
		s.Buckets = append(s.Buckets, b)
	}
	base := s.Window(0, 3930*time.Millisecond)
	if base.Requests != 300 || !near(base.Quantile(99), 10*time.Millisecond) {
		t.Errorf("baseline [0, 3.93 s): %d requests, p99 %s; want 300 at ~10ms (seconds 0-2 only)", base.Requests, base.Quantile(99))
	}
	if base.Start != 0 || base.Width != 3*time.Second {
		t.Errorf("baseline span %s+%s, want 0s+3s", base.Start, base.Width)
	}
	fault := s.Window(3930*time.Millisecond, 7200*time.Millisecond)
	if fault.Requests != 300 || fault.Start != 4*time.Second || fault.Width != 3*time.Second {
		t.Errorf("fault [3.93 s, 7.2 s): %d requests over %s+%s; want 300 over 4s+3s", fault.Requests, fault.Start, fault.Width)
	}
}
