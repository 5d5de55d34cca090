// Package textio holds the small writing helpers that drill's text
// outputs (the run summary, compare, history) share.
package textio

import (
	"fmt"
	"io"
)

// ErrWriter writes to W until a write fails, keeps that first error in
// Err (wrapped with What, e.g. "write comparison"), and drops every later
// write, so that a renderer can print freely and check Err once at the end.
// It is not safe for concurrent use.
type ErrWriter struct {
	W    io.Writer
	What string
	Err  error
}

// Write implements io.Writer: it always reports len(p) written; the first
// failure is in Err.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return len(p), nil
	}
	if _, err := e.W.Write(p); err != nil {
		if e.What != "" {
			err = fmt.Errorf("%s: %w", e.What, err)
		}
		e.Err = err
	}
	return len(p), nil
}
