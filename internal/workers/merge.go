package workers

import (
	"fmt"
	"sort"
	"time"

	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
)

// secondKey names one second of one stream.
type secondKey struct {
	stream string
	start  time.Duration
}

// pendingSecond is a second some workers have reported.
type pendingSecond struct {
	b    *measure.Bucket
	from []bool // by worker index
	n    int
}

// merger gathers N workers' seconds and hands each second of each stream
// on once, merged, when every worker has reported it; a worker's later
// reports of a second (results that arrived after it closed, Intended 0)
// follow as increments, as one engine's do. Not safe for concurrent use.
type merger struct {
	n       int
	sink    load.SecondSink
	open    map[secondKey]*pendingSecond
	emitted map[secondKey]bool
	// last is the start of the last second each worker reported, per stream
	// (-1: none).
	last []map[string]time.Duration
}

func newMerger(n int, sink load.SecondSink) *merger {
	m := &merger{n: n, sink: sink, open: map[secondKey]*pendingSecond{}, emitted: map[secondKey]bool{}}
	for range n {
		m.last = append(m.last, map[string]time.Duration{})
	}
	return m
}

// add takes worker's second b of stream (b is kept). Errors: a bad worker
// index, or the sink's.
func (m *merger) add(worker int, stream string, b *measure.Bucket) error {
	if worker < 0 || worker >= m.n {
		return fmt.Errorf("merge: worker index %d out of range 0..%d", worker, m.n-1)
	}
	k := secondKey{stream, b.Start}
	if m.emitted[k] {
		// An increment of a second already handed on.
		b.Intended = 0
		return m.sink.WriteSecond(stream, b)
	}
	p := m.open[k]
	if p == nil {
		p = &pendingSecond{b: b, from: make([]bool, m.n)}
		m.open[k] = p
	} else {
		p.b.Merge(b)
	}
	if !p.from[worker] {
		p.from[worker] = true
		p.n++
		if l, ok := m.last[worker][stream]; !ok || b.Start > l {
			m.last[worker][stream] = b.Start
		}
	}
	if p.n < m.n {
		return nil
	}
	delete(m.open, k)
	m.emitted[k] = true
	return m.sink.WriteSecond(stream, p.b)
}

// lastSecond is the latest second worker reported over all streams, and
// whether it reported any.
func (m *merger) lastSecond(worker int) (time.Duration, bool) {
	var last time.Duration
	any := false
	for _, l := range m.last[worker] {
		if !any || l > last {
			last, any = l, true
		}
	}
	return last, any
}

// flush hands on every second not all workers reported, merged from those
// that did, in order, and returns them as "stream t=START (missing workers
// I, J)" lines; none when every second was complete.
func (m *merger) flush() ([]string, error) {
	keys := make([]secondKey, 0, len(m.open))
	for k := range m.open {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].stream != keys[j].stream {
			return keys[i].stream < keys[j].stream
		}
		return keys[i].start < keys[j].start
	})
	var out []string
	for _, k := range keys {
		p := m.open[k]
		var missing []int
		for i, ok := range p.from {
			if !ok {
				missing = append(missing, i)
			}
		}
		out = append(out, fmt.Sprintf("stream %s second t=%s (missing workers %v)", k.stream, k.start, missing))
		delete(m.open, k)
		m.emitted[k] = true
		if err := m.sink.WriteSecond(k.stream, p.b); err != nil {
			return out, err
		}
	}
	return out, nil
}
