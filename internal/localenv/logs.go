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
	out     io.Writer // the process's output only; may be nil
	lines   []string  // ring
	size    int
	next    uint64 // sequence number of the next line
	partial []byte
}

func newLogSink(file, out io.Writer, size int) *logSink {
	if size <= 0 {
		size = DefaultLogLines
	}
	return &logSink{file: file, out: out, lines: make([]string, size), size: size}
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
	if l.out != nil {
		_, _ = l.out.Write(p)
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

// maxPending caps what a lineWriter holds back waiting for a newline.
const maxPending = 64 << 10

// lineWriter hands what is written to it on to w in whole lines: each
// Write passes on every complete line it has in one call to w, and keeps
// the rest until its newline comes (or maxPending bytes wait, or flush).
// One per output stream of a process; Write is called by one goroutine
// (os/exec's copier), flush after it has finished.
type lineWriter struct {
	w   io.Writer
	buf []byte
}

// Write implements io.Writer; it never fails.
func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.buf = append(lw.buf, p...)
	if i := bytes.LastIndexByte(lw.buf, '\n'); i >= 0 {
		_, _ = lw.w.Write(lw.buf[:i+1])
		lw.buf = append(lw.buf[:0], lw.buf[i+1:]...)
	}
	if len(lw.buf) >= maxPending {
		_, _ = lw.w.Write(lw.buf)
		lw.buf = lw.buf[:0]
	}
	return len(p), nil
}

// flush passes on an unfinished last line.
func (lw *lineWriter) flush() {
	if len(lw.buf) > 0 {
		_, _ = lw.w.Write(lw.buf)
		lw.buf = lw.buf[:0]
	}
}
