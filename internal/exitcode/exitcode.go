// Package exitcode holds drill's documented exit codes (docs/DESIGN.md §11)
// and carries them on errors, so that only the program's entry point turns
// an error into a process exit status.
//
// Any package may attach a code with [Wrap], or by returning an error type
// with an ExitCode() int method; [Code] finds it with errors.As.
package exitcode

import "errors"

// Exit codes, documented in the README.
const (
	// OK: every assertion passed, and the run was valid and clean.
	OK = 0
	// AssertionFailed: an assertion failed.
	AssertionFailed = 1
	// BadInput: bad input or usage; nothing was touched.
	BadInput = 2
	// CouldNotRun: the run could not be carried out (environment, aborted
	// by a stop condition or a signal). Also the code of any error that
	// carries no code.
	CouldNotRun = 3
	// InvalidMeasurement: the load generator fell behind its schedule
	// beyond its budget, or a fault was not on the traffic path; no verdict
	// can be trusted.
	InvalidMeasurement = 4
	// CleanupUnverified: a fault may still be active; the message says
	// which and how to remove it.
	CleanupUnverified = 5
)

// Coder is implemented by errors that carry their own exit code.
type Coder interface {
	ExitCode() int
}

// codeError attaches an exit code to an error.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }
func (e *codeError) ExitCode() int { return e.code }

// Wrap returns err carrying exit code code; its message is err's. Wrap(c,
// nil) is nil. The outermost code wins when codes are nested.
func Wrap(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codeError{code: code, err: err}
}

// Code returns the exit code for err: 0 for nil, the code of the first
// [Coder] in err's chain, else [CouldNotRun].
func Code(err error) int {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return CouldNotRun
}
