package localenv

import (
	"bytes"
	"io"
	"sync"
)

// DefaultLogLines is how many of a replica's last log lines are kept in
// memory (for restart events and WaitReady errors).
const DefaultLogLines = 50

// maxLineBytes caps one line kept in memory; longer lines are cut.
const maxLineBytes = 2048

// logSink receives a replica's stdout and stderr: every byte goes to the
// log file, and the last lines are kept in a ring with a sequence number so
// the lines of one container instance can be taken. Safe for concurrent use.
type logSink struct {
	mu      sync.Mutex
	file    io.Writer // may be nil
	lines   []string  // ring
	size    int
	next    uint64 // sequence number of the next line
	partial []byte
}

func newLogSink(file io.Writer, size int) *logSink {
	if size <= 0 {
		size = DefaultLogLines
	}
	return &logSink{file: file, lines: make([]string, size), size: size}
}

// Write implements io.Writer. It never fails: a failing log file must not
// stop the replica.
func (l *logSink) Write(p []byte) (int, error) {
	n := len(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_, _ = l.file.Write(p)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if room := maxLineBytes - len(l.partial); room > 0 {
				l.partial = append(l.partial, p[:min(room, len(p))]...)
			}
			break
		}
		chunk := p[:i]
		if room := maxLineBytes - len(l.partial); room > 0 {
			l.partial = append(l.partial, chunk[:min(room, len(chunk))]...)
		}
		l.pushLocked(string(bytes.TrimRight(l.partial, "\r")))
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *logSink) pushLocked(s string) {
	l.lines[l.next%uint64(l.size)] = s
	l.next++
}

// mark writes a line of drill's own (e.g. "container started") to the file
// and ring and returns the sequence number of the line after it.
func (l *logSink) mark(s string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 { // end a line the last instance left open
		l.pushLocked(string(l.partial))
		l.partial = l.partial[:0]
		if l.file != nil {
			_, _ = l.file.Write([]byte("\n"))
		}
	}
	if l.file != nil {
		_, _ = io.WriteString(l.file, s+"\n")
	}
	l.pushLocked(s)
	return l.next
}

// since returns the kept lines with sequence number >= seq (all kept lines
// for 0), oldest first, plus an unfinished last line if any.
func (l *logSink) since(seq uint64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := uint64(0)
	if l.next > uint64(l.size) {
		first = l.next - uint64(l.size)
	}
	first = max(first, seq)
	out := make([]string, 0, l.next-min(first, l.next)+1)
	for i := first; i < l.next; i++ {
		out = append(out, l.lines[i%uint64(l.size)])
	}
	if len(l.partial) > 0 {
		out = append(out, string(l.partial))
	}
	return out
}
