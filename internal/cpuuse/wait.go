package cpuuse

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// parseRunDelay returns the second field of a /proc/<pid>/task/<tid>/
// schedstat line ("<on-CPU ns> <run-queue wait ns> <timeslices>"): the
// nanoseconds the thread spent runnable but waiting for a CPU.
func parseRunDelay(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, fmt.Errorf("parse schedstat %q: %d fields, want 3", s, len(f))
	}
	v, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse schedstat run delay: %w", err)
	}
	return v, nil
}

// readRunDelays returns the run-queue wait (ns) of each thread of process
// pid under root, by thread id. Threads that exit meanwhile are skipped.
// The error is for the task directory itself (a kernel without
// CONFIG_SCHED_INFO has no schedstat files: the error then wraps
// [os.ErrNotExist] too).
func readRunDelays(root string, pid int) (map[int]uint64, error) {
	dir := filepath.Join(root, strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read threads of process %d: %w", pid, err)
	}
	out := make(map[int]uint64, len(ents))
	var first error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		v, err := parseRunDelay(string(b))
		if err != nil {
			return nil, fmt.Errorf("thread %d of process %d: %w", tid, pid, err)
		}
		out[tid] = v
	}
	if len(out) == 0 && first != nil {
		return nil, fmt.Errorf("read run delay of process %d: %w", pid, first)
	}
	return out, nil
}

// waitAccount sums a process's run-queue wait over its threads across
// samples. A thread's counter lives as long as the thread, so the account
// adds each thread's growth since the previous sample; a thread first seen
// after the first sample counts from 0 (it started meanwhile, so all its
// wait is the run's), and one that exits keeps what was counted.
type waitAccount struct {
	started bool
	last    map[int]uint64
	// total is the wait (ns) counted since the first sample.
	total uint64
}

// add takes one reading of every thread's counter (ns by thread id) and
// returns the account's total since the first reading (ns).
func (w *waitAccount) add(now map[int]uint64) uint64 {
	if w.started {
		for tid, v := range now {
			if prev, seen := w.last[tid]; !seen {
				w.total += v
			} else if v > prev {
				w.total += v - prev
			}
		}
	}
	w.started = true
	w.last = now
	return w.total
}
