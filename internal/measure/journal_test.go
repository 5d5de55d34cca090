package measure

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// fullBucket returns a bucket with every field set to a distinct value.
func fullBucket(start time.Duration) *Bucket {
	b := NewBucket(start, time.Second)
	b.Intended, b.Requests, b.OK = 11, 10, 6
	b.Codes[200], b.Codes[503], b.Codes[429] = 6, 3, 1
	b.Errors[ErrTimeout] = 1
	b.BytesIn, b.BytesOut = 1234, 567
	b.Late, b.ShedRetryAfter, b.Retries = 2, 3, 4
	for i := 1; i <= 10; i++ {
		Record(b.Latency, time.Duration(i)*time.Millisecond)
		Record(b.Lag, time.Duration(i)*100*time.Microsecond)
	}
	for i := 1; i <= 4; i++ {
		Record(b.Shed, time.Duration(i)*300*time.Microsecond)
	}
	return b
}

// sameBucket fails t unless every field of got equals want's (histograms
// count by count; none may be empty).
func sameBucket(t *testing.T, what string, got, want *Bucket) {
	t.Helper()
	g, w := *got, *want
	g.Latency, g.Lag, g.Shed, w.Latency, w.Lag, w.Shed = nil, nil, nil, nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: counters\n got %+v\nwant %+v", what, g, w)
	}
	for _, h := range []struct {
		name      string
		got, want *Hist
	}{
		{"latency", got.Latency, want.Latency},
		{"lag", got.Lag, want.Lag},
		{"shed", got.Shed, want.Shed},
	} {
		if h.got.TotalCount() == 0 || !reflect.DeepEqual(counts(h.got), counts(h.want)) {
			t.Fatalf("%s: %s histogram differs (%d values, want %d)", what, h.name, h.got.TotalCount(), h.want.TotalCount())
		}
	}
}

// TestJournalRoundTrip: every field of a bucket survives the journal; a
// second written twice is merged; other kinds reach Data with their data;
// a partial last line (a write cut by SIGKILL) is skipped.
func TestJournalRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), SecondsFile)
	j, err := CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.WriteData(KindHeader, map[string]string{"runId": "r1"}); err != nil {
		t.Fatal(err)
	}
	b0, b1 := fullBucket(0), fullBucket(time.Second)
	extra := NewBucket(time.Second, time.Second)
	extra.Requests, extra.Errors[ErrReset] = 1, 1
	Record(extra.Latency, 3*time.Second)
	Record(extra.Lag, time.Millisecond)
	for _, w := range []struct {
		stream string
		b      *Bucket
	}{{"orders", b0}, {"orders", b1}, {"tax", b0}, {"orders", extra}} {
		if err := j.WriteSecond(w.stream, w.b); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.WriteData(KindEvent, map[string]any{"at": 5, "kind": "fault-on"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteSecond("orders", b0); err == nil {
		t.Fatal("write after Close succeeded")
	}
	// A crash in the middle of a line.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"kind":"second","stream":"orders","bucket":{"start":2000`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var kinds []string
	f2, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	var seconds int
	err = ReadJournal(f2, JournalReader{
		Second: func(string, *Bucket) error { seconds++; return nil },
		Data: func(kind string, data json.RawMessage) error {
			kinds = append(kinds, kind+" "+string(data))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`header {"runId":"r1"}`, `event {"at":5,"kind":"fault-on"}`}; !reflect.DeepEqual(kinds, want) || seconds != 4 {
		t.Fatalf("read %d seconds and %q, want 4 and %q", seconds, kinds, want)
	}

	series, err := LoadSeries(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 2 || len(series["orders"].Buckets) != 2 || len(series["tax"].Buckets) != 1 {
		t.Fatalf("series: %v", series)
	}
	sameBucket(t, "orders 0 s", series["orders"].Buckets[0], b0)
	sameBucket(t, "tax 0 s", series["tax"].Buckets[0], b0)
	merged := fullBucket(time.Second)
	merged.Merge(extra)
	sameBucket(t, "orders 1 s (merged)", series["orders"].Buckets[1], merged)
}

// TestReadJournalErrors: a whole line that is not a journal line is an
// error naming its line number.
func TestReadJournalErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"not json", "{\"kind\":\"header\"}\nnot json\n", "line 2"},
		{"second without bucket", "{\"kind\":\"second\",\"stream\":\"x\"}\n", "line 1: a second without stream or bucket"},
		{"bad histogram", "{\"kind\":\"second\",\"stream\":\"x\",\"bucket\":{\"latency\":\"%%%\"}}\n", "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadJournal(strings.NewReader(tc.text), JournalReader{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// counts is h's every count (nil for a nil histogram).
func counts(h *Hist) *hdrhistogram.Snapshot {
	if h == nil {
		return nil
	}
	d := NewHist()
	d.Merge(h) // dense, whatever h's form
	if d.dense == nil {
		return nil
	}
	return d.dense.Export()
}
