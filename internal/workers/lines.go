package workers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// KindWorker is the journal line kind of a worker's own reports; its
// "data" is a [Status]. Seconds use [measure.KindSecond].
const KindWorker = "worker"

// Worker status events, in the order a worker writes them.
const (
	// EventReady: the worker is about to run its schedule. Late says by how
	// much the first stream's start had already passed (0: on time).
	EventReady = "ready"
	// EventAlive is written once a second while the worker runs.
	EventAlive = "alive"
	// EventDone: the worker's schedule is over and every second written.
	// Sent and LateRequests are its totals; Error, when set, is why its
	// own generator was behind schedule.
	EventDone = "done"
)

// Status is the data of a [KindWorker] line.
type Status struct {
	// Event is EventReady, EventAlive or EventDone.
	Event string `json:"event"`
	// Index is the worker's index.
	Index int `json:"index"`
	// At is the worker's clock reading, as an offset from t=0 (ns).
	At time.Duration `json:"at"`
	// Late is how long after the first stream's start the worker got
	// ready (ns); 0 when on time (EventReady only).
	Late time.Duration `json:"late,omitempty"`
	// Sent and LateRequests are the worker's totals (EventDone only).
	Sent         int64 `json:"sent,omitempty"`
	LateRequests int64 `json:"lateRequests,omitempty"`
	// Error is the worker's own verdict on its schedule (EventDone only).
	Error string `json:"error,omitempty"`
	// Clock is the worker's clock measured against the API server's
	// (EventReady only; nil when the worker did not try).
	Clock *ClockReading `json:"clock,omitempty"`
}

// line is one output line, the shape of measure's journal lines.
type line struct {
	Kind   string          `json:"kind"`
	Stream string          `json:"stream,omitempty"`
	Bucket *measure.Bucket `json:"bucket,omitempty"`
	Data   any             `json:"data,omitempty"`
}

// lineWriter writes lines to w, each with one Write call. Safe for
// concurrent use; it implements load.SecondSink.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

func (lw *lineWriter) write(l line) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf.Reset()
	enc := json.NewEncoder(&lw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return fmt.Errorf("encode %s line: %w", l.Kind, err)
	}
	if _, err := lw.w.Write(lw.buf.Bytes()); err != nil {
		return fmt.Errorf("write %s line: %w", l.Kind, err)
	}
	return nil
}

// WriteSecond writes one closed second of stream.
func (lw *lineWriter) WriteSecond(stream string, b *measure.Bucket) error {
	return lw.write(line{Kind: measure.KindSecond, Stream: stream, Bucket: b})
}

// writeStatus writes a worker line.
func (lw *lineWriter) writeStatus(s Status) error {
	return lw.write(line{Kind: KindWorker, Data: s})
}
