package inject

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/proctree"
)

// KindStandIn is a process of the platform a run started from drill's own
// binary (internal/standin: its Toxiproxy, its HTTP stubs, a local
// Service's balancer). It is journaled once started and closed once it
// ended; a stand-in ends by itself when its run's process dies, so
// `drill cleanup` finds it gone, and ends it (SIGKILL) if it is still
// the same process.
const KindStandIn = "stand-in"

// StandInEntry is the journal entry of the stand-in name with process id.
func StandInEntry(op, name string, id proctree.ID) Entry {
	return Entry{Op: op, Key: "stand-in:" + name, Kind: KindStandIn, Dependency: name, Procs: []proctree.ID{id}}
}

// undoStandIn ends the stand-in process of e if it is still the same
// process.
func undoStandIn(ctx context.Context, e Entry) (detail string, gone bool, err error) {
	var ended []int
	for _, id := range e.Procs {
		if !proctree.Same(id) {
			continue
		}
		if err := syscall.Kill(id.PID, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return "", false, fmt.Errorf("end stand-in %s (pid %d): %w", e.Dependency, id.PID, err)
		}
		ended = append(ended, id.PID)
	}
	if len(ended) == 0 {
		return "", true, nil
	}
	// Wait for the kill to land, so a second cleanup finds it gone.
	for _, pid := range ended {
		for proctree.Alive(pid) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return fmt.Sprintf("ended pid %v (SIGKILL)", ended), false, nil
}
