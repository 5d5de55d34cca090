// Package app is drill's command line: it turns flags and arguments into
// calls of the internal packages, prints each error once and maps errors to
// the documented exit codes (internal/exitcode). cmd/drill only calls
// [Main]; tests call [Execute] or [Run].
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// version is set at build time with
// -ldflags "-X github.com/drillhq/drill/internal/app.version=...".
var version = "dev"

// Main runs drill with the process's arguments, streams and signals and
// exits with the code of the outcome. The first SIGINT or SIGTERM cancels
// the run's context (load stops, faults are reverted, reports flushed); a
// second one cancels Globals.Hard (a run still reverts faults, stops its
// processes and writes its reports); a third exits at once with code 3.
func Main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	hard, cancelHard := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := sigName(<-sigs)
		fmt.Fprintf(os.Stderr, "drill: %s: stopping gracefully (again: stop at once)\n", s)
		cancel(fmt.Errorf("interrupted by %s", s))
		s = sigName(<-sigs)
		fmt.Fprintf(os.Stderr, "drill: %s again: still undoing what was started and writing the reports (again: exit without cleanup)\n", s)
		cancelHard()
		s = sigName(<-sigs)
		fmt.Fprintf(os.Stderr, "drill: %s a third time: exiting; faults may remain active, run drill cleanup\n", s)
		os.Exit(exitcode.CouldNotRun)
	}()
	code := execute(ctx, hard, os.Stdout, os.Stderr, os.Args[1:], os.Getenv)
	signal.Stop(sigs)
	cancel(nil)
	os.Exit(code)
}

// Execute runs drill with args, prints any error once to stderr and returns
// the exit code. getenv reads the environment (os.Getenv in production).
func Execute(ctx context.Context, stdout, stderr io.Writer, args []string, getenv func(string) string) int {
	return execute(ctx, nil, stdout, stderr, args, getenv)
}

func execute(ctx, hard context.Context, stdout, stderr io.Writer, args []string, getenv func(string) string) int {
	g := &Globals{Stdout: stdout, Stderr: stderr, Version: version, Getenv: getenv, Hard: hard}
	err := Run(ctx, g, args)
	if err != nil {
		printError(stderr, err)
	}
	return exitcode.Code(err)
}

// printError writes err once: located scenario errors as they are (one
// "file:line:col: path: message" per line, as editors expect; the scenario
// package redacted their messages), anything else prefixed with "drill: "
// and redacted by the default rules (internal/redact), as errors may echo
// URLs and connection strings.
func printError(w io.Writer, err error) {
	msg := err.Error()
	if scenario.AsErrors(err) != nil {
		fmt.Fprintln(w, msg)
		return
	}
	msg = (*redact.Redactor)(nil).Text(msg)
	var u *usageError
	if errors.As(err, &u) {
		fmt.Fprintf(w, "drill: %s\nRun '%s --help' for usage.\n", msg, u.command)
		return
	}
	if !strings.HasPrefix(msg, "drill ") && !strings.HasPrefix(msg, "drill: ") {
		msg = "drill: " + msg
	}
	fmt.Fprintln(w, msg)
}

// usageError is a command-line mistake (exit 2).
type usageError struct {
	command string
	err     error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
func (e *usageError) ExitCode() int { return exitcode.BadInput }

// sigName names the signals drill handles as people write them.
func sigName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}
