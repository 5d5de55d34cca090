package redact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Handler returns a slog.Handler that applies r's rules to every record
// before h sees it: the message and string values get [Redactor.Text]
// (errors and fmt.Stringers as their text), and an attribute whose key is
// sensitive ([Redactor.SensitiveKey]) loses its value unless it is a count
// or an outcome ([CountOrOutcome]: auth_failures_total=3). Other values pass
// unchanged unless their printed form holds a secret.
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (x *handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, x.r.Text(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(x.attr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = x.attr(a)
	}
	return &handler{h: x.h.WithAttrs(red), r: x.r}
}

func (x *handler) WithGroup(name string) slog.Handler {
	return &handler{h: x.h.WithGroup(name), r: x.r}
}

func (x *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() != slog.KindGroup && x.r.SensitiveKey(a.Key) && !CountOrOutcome(a.Key, v.String()) {
		return slog.String(a.Key, Redacted)
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.r.Text(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = x.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var text string
		switch t := v.Any().(type) {
		case error:
			text = t.Error()
		case fmt.Stringer:
			text = t.String()
		default:
			text = fmt.Sprint(t)
		}
		if red := x.r.Text(text); red != text {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Error returns err with r's rules applied to its message; errors.Is and
// errors.As still see err (exit codes, located scenario errors). nil
// stays nil.
func Error(err error, r *Redactor) error {
	if err == nil {
		return nil
	}
	msg := r.Text(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// maxPartialLine bounds how much of an unfinished line a [LineWriter]
// holds before it writes it out (redacted) anyway.
const maxPartialLine = 64 << 10

// LineWriter writes to an underlying writer line by line, each line
// redacted with r's rules, so a secret split across writes is still
// caught. A line longer than 64 KiB is written in pieces. Flush writes
// an unfinished last line. Safe for concurrent use.
type LineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	r   *Redactor
	buf []byte
}

// NewLineWriter returns a LineWriter over w.
func NewLineWriter(w io.Writer, r *Redactor) *LineWriter {
	return &LineWriter{w: w, r: r}
}

// Write implements io.Writer. It reports len(p) written unless the
// underlying writer fails.
func (l *LineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	var errs []error
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		errs = append(errs, l.emit(l.buf[:i], true))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxPartialLine {
		errs = append(errs, l.emit(l.buf, false))
		l.buf = l.buf[:0]
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the unfinished last line, if any.
func (l *LineWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return nil
	}
	err := l.emit(l.buf, false)
	l.buf = l.buf[:0]
	return err
}

func (l *LineWriter) emit(line []byte, nl bool) error {
	s := l.r.Text(string(line))
	if nl {
		s += "\n"
	}
	_, err := io.WriteString(l.w, s)
	return err
}
