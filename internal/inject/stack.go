package inject

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// DefaultRevertTimeout bounds each revert run by [Stack.RevertAll].
const DefaultRevertTimeout = 15 * time.Second

// Stack is a LIFO of reverts (STYLE rule 15): push each revert the moment
// its fault is applied; RevertAll runs whatever has not run yet on any exit
// path. Safe for concurrent use; the zero value is ready (timeout
// [DefaultRevertTimeout], no log).
type Stack struct {
	// Timeout bounds each revert in RevertAll; 0 means DefaultRevertTimeout.
	Timeout time.Duration
	// Log gets a line per revert; nil discards.
	Log *slog.Logger

	mu    sync.Mutex
	items []*stackItem
}

type stackItem struct {
	name   string
	revert Revert
	mu     sync.Mutex
	done   bool
}

// run calls the revert unless it already succeeded. A concurrent caller
// waits for the first and then sees it done.
func (it *stackItem) run(ctx context.Context) error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.done {
		return nil
	}
	if err := it.revert(ctx); err != nil {
		return fmt.Errorf("revert %s: %w", it.name, err)
	}
	it.done = true
	return nil
}

// Push adds a revert under a name (used in errors and logs) and returns a
// wrapper to call at the fault's planned end: the wrapper and RevertAll
// together run r successfully at most once; after a failure either may
// retry.
func (s *Stack) Push(name string, r Revert) Revert {
	it := &stackItem{name: name, revert: r}
	s.mu.Lock()
	s.items = append(s.items, it)
	s.mu.Unlock()
	return it.run
}

// Pending is the number of reverts that have not succeeded yet.
func (s *Stack) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, it := range s.items {
		it.mu.Lock()
		if !it.done {
			n++
		}
		it.mu.Unlock()
	}
	return n
}

// RevertAll runs every pending revert, last pushed first. Each gets a fresh
// context bounded by Timeout and NOT cancelled with ctx (a cancelled run
// still reverts; ctx only supplies values). A failure does not stop the
// others; errors are joined. Calling it again retries only what failed.
func (s *Stack) RevertAll(ctx context.Context) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultRevertTimeout
	}
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	items := append([]*stackItem(nil), s.items...)
	s.mu.Unlock()
	base := context.WithoutCancel(ctx)
	var errs []error
	for i := len(items) - 1; i >= 0; i-- {
		rctx, cancel := context.WithTimeout(base, timeout)
		err := items[i].run(rctx)
		cancel()
		if err != nil {
			log.Error("revert failed", "fault", items[i].name, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
