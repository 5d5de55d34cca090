package measure

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
)

// SecondsFile is the name of the per-second journal in a run's report
// directory: JSON lines, one object per line, appended while the run goes
// (see [Journal]).
const SecondsFile = "seconds.jsonl"

// Journal line kinds. A journal holds any number of lines of each kind, in
// the order they were written.
const (
	// KindSecond is one closed second of one stream:
	// {"kind":"second","stream":NAME,"bucket":BUCKET}, BUCKET as
	// [Bucket.MarshalJSON] writes it (histograms in the HdrHistogram V2
	// compressed encoding, base64). A second may appear more than once
	// (results that arrived after it was written); readers merge them.
	KindSecond = "second"
	// KindHeader and KindEvent are written by the run (internal/record):
	// their "data" is opaque to this package.
	KindHeader = "header"
	KindEvent  = "event"
)

// journalLine is one line of a journal.
type journalLine struct {
	Kind   string          `json:"kind"`
	Stream string          `json:"stream,omitempty"`
	Bucket *Bucket         `json:"bucket,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Journal appends lines to a journal file. Every line is written with one
// write call as soon as it is given (no buffering in the process, no
// fsync), so a process killed with SIGKILL leaves every line it wrote
// whole, except at most a last, partial one, which readers skip. Safe for
// concurrent use.
type Journal struct {
	mu  sync.Mutex
	f   *os.File
	buf bytes.Buffer
}

// CreateJournal creates (or truncates) the journal at path, mode 0644. The
// directory must exist. Errors are wrapped with the path.
func CreateJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create seconds journal: %w", err)
	}
	return &Journal{f: f}, nil
}

// WriteSecond appends one closed second b of stream. b is encoded before
// WriteSecond returns and not kept. Errors (encoding, a failed write) are
// wrapped with the stream and second.
func (j *Journal) WriteSecond(stream string, b *Bucket) error {
	return j.write(journalLine{Kind: KindSecond, Stream: stream, Bucket: b}, func() string {
		return fmt.Sprintf("stream %s second %s", stream, b.Start)
	})
}

// WriteData appends a line of kind with v encoded as JSON in its "data".
// Errors are wrapped with the kind.
func (j *Journal) WriteData(kind string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("journal %s: encode: %w", kind, err)
	}
	return j.write(journalLine{Kind: kind, Data: data}, func() string { return kind })
}

func (j *Journal) write(l journalLine, what func() string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("journal %s: %w", what(), os.ErrClosed)
	}
	j.buf.Reset()
	enc := json.NewEncoder(&j.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil { // Encode ends the line with \n
		return fmt.Errorf("journal %s: encode: %w", what(), err)
	}
	if _, err := j.f.Write(j.buf.Bytes()); err != nil {
		return fmt.Errorf("journal %s: write %s: %w", what(), j.f.Name(), err)
	}
	return nil
}

// Close closes the file; later writes fail with os.ErrClosed. Closing
// twice is not an error.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("close seconds journal: %w", err)
	}
	return nil
}

// JournalReader is what [ReadJournal] calls for each line: Second for
// KindSecond lines (b is the caller's to keep), Data for every other kind
// with the line's raw "data". Either may be nil (the lines are skipped).
// An error returned by either stops the reading and is returned wrapped.
type JournalReader struct {
	Second func(stream string, b *Bucket) error
	Data   func(kind string, data json.RawMessage) error
}

// maxJournalLine bounds one journal line (a second's three encoded
// histograms are a few KB; a header holds a scenario).
const maxJournalLine = 64 << 20

// ReadJournal streams the journal in r line by line: memory holds one line
// at a time. A last line without its newline (a write cut short by a
// crash) is skipped; any other undecodable line is an error naming its
// line number.
func ReadJournal(r io.Reader, fn JournalReader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Long line: gather it whole.
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(full) <= maxJournalLine {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				return fmt.Errorf("seconds journal line %d: longer than %d bytes", n, maxJournalLine)
			}
			line = full
		}
		if err == io.EOF {
			return nil // nothing, or a partial last line
		}
		if err != nil {
			return fmt.Errorf("read seconds journal: %w", err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("seconds journal line %d: %w", n, err)
		}
		switch {
		case l.Kind == KindSecond:
			if l.Bucket == nil || l.Stream == "" {
				return fmt.Errorf("seconds journal line %d: a second without stream or bucket", n)
			}
			if fn.Second != nil {
				if err := fn.Second(l.Stream, l.Bucket); err != nil {
					return fmt.Errorf("seconds journal line %d: %w", n, err)
				}
			}
		case fn.Data != nil:
			if err := fn.Data(l.Kind, l.Data); err != nil {
				return fmt.Errorf("seconds journal line %d (%s): %w", n, l.Kind, err)
			}
		}
	}
}

// SeriesBuilder gathers journal seconds into one [Series] per stream: a
// second seen twice is merged, and the buckets come out sorted by Start.
// Memory: one bucket with packed histograms ([Hist]: a few KB, where a
// dense one is ~450 KB) per stream-second gathered, so an hour of the
// seeds' three streams is tens of MB. The zero value is ready to use; not
// safe for concurrent use.
type SeriesBuilder struct {
	byStream map[string]map[int64]*Bucket
}

// Add merges b (stream's second) into the builder; b may be kept, and its
// histograms are packed in place ([Bucket.Pack]).
func (sb *SeriesBuilder) Add(stream string, b *Bucket) {
	b.Pack()
	if sb.byStream == nil {
		sb.byStream = map[string]map[int64]*Bucket{}
	}
	m := sb.byStream[stream]
	if m == nil {
		m = map[int64]*Bucket{}
		sb.byStream[stream] = m
	}
	if have := m[int64(b.Start)]; have != nil {
		have.Merge(b)
		return
	}
	m[int64(b.Start)] = b
}

// Series returns the gathered series by stream name, each sorted by Start;
// an empty map when nothing was added.
func (sb *SeriesBuilder) Series() map[string]*Series {
	out := make(map[string]*Series, len(sb.byStream))
	for name, m := range sb.byStream {
		s := &Series{Stream: name, Buckets: make([]*Bucket, 0, len(m))}
		for _, b := range m {
			s.Buckets = append(s.Buckets, b)
		}
		sort.Slice(s.Buckets, func(i, k int) bool { return s.Buckets[i].Start < s.Buckets[k].Start })
		out[name] = s
	}
	return out
}

// LoadSeries reads the seconds of the journal at path into one Series per
// stream (see [SeriesBuilder]; other lines are skipped). Errors name the
// path.
func LoadSeries(path string) (map[string]*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open seconds journal: %w", err)
	}
	defer f.Close()
	var sb SeriesBuilder
	if err := ReadJournal(f, JournalReader{Second: func(stream string, b *Bucket) error {
		sb.Add(stream, b)
		return nil
	}}); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sb.Series(), nil
}
