package scenario

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/redact"
)

// Error is one problem found in a scenario, located where the user wrote it.
type Error struct {
	// File is the file the problem is in (the scenario, or a manifest it
	// points at); empty for scenarios built in code.
	File string
	// Line and Column are 1-based; 0 when unknown.
	Line, Column int
	// Path is the field path as written, e.g. "faults[0].latency"; empty
	// for problems with the file as a whole.
	Path string
	// Msg says what is wrong and, where one helps, how to fix it.
	Msg string
}

// Error renders "file:line:col: path: message" (parts that are unknown are
// left out).
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Line, max(e.Column, 1))
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one scenario, sorted by file and
// position. [Load], [Parse] and [Scenario.Validate] return it for bad input;
// match it with errors.As.
type Errors struct {
	List []*Error
}

// Error prints one problem per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, x := range e.List {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// ExitCode is 2: a bad scenario is bad input, and nothing was touched
// (the table is in internal/exitcode and the README).
func (e *Errors) ExitCode() int { return 2 }

// Unwrap gives the single problems to errors.Is and errors.As.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i, x := range e.List {
		out[i] = x
	}
	return out
}

// errorList collects located errors.
type errorList struct {
	list []*Error
	// rd redacts messages (nil: the default rules): a problem must not
	// print the secret it is about.
	rd *redact.Redactor
}

func (l *errorList) add(e *Error) {
	e.Msg = redactMessage(l.rd, e.Path, e.Msg)
	l.list = append(l.list, e)
}

// err returns nil or the sorted, de-duplicated *Errors.
func (l *errorList) err(mainFile string) error {
	if len(l.list) == 0 {
		return nil
	}
	list := append([]*Error(nil), l.list...)
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.File != b.File {
			// The scenario file first, then files it points at.
			if a.File == mainFile || b.File == mainFile {
				return a.File == mainFile
			}
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := list[:0]
	seen := map[string]bool{}
	for _, e := range list {
		k := e.Error()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return &Errors{List: out}
}

// AsErrors returns the located problems in err, or nil when err holds none.
func AsErrors(err error) *Errors {
	var e *Errors
	if errors.As(err, &e) {
		return e
	}
	return nil
}
