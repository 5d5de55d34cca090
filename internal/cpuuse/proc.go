// Package cpuuse says where a run's CPU went: the CPU time each part of a
// run used (drill itself, each service's replica process trees, each
// dependency's processes), read from Linux's /proc and sampled once a
// second, beside the machine's busy time from /proc/stat over the same
// span. It also names the pprof labels drill puts on its own goroutines,
// so a CPU profile (`drill run --cpuprofile`) splits drill's share by part.
//
// CPU times are in seconds. Shares are fractions (0..1) of the machine's
// CPU capacity over the sampled span: its number of cores times the span's
// length on the run's clock. The machine's busy time is that capacity less
// the idle time /proc/stat counts (its busy fields lose ticks in VMs).
// /proc counts CPU in clock ticks of 1/100 s (USER_HZ, fixed at 100 on
// every Linux architecture Go supports), so a part's figure is exact to
// 0.01 s per sample.
package cpuuse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// TicksPerSecond is USER_HZ, the unit of /proc's CPU times.
const TicksPerSecond = 100

// procStat is what a sample needs of one /proc/<pid>/stat line.
type procStat struct {
	pid, ppid int
	state     byte
	// start is the start time in ticks after boot (field 22); with pid it
	// names a process across PID reuse.
	start uint64
	// own is utime+stime; children is cutime+cstime: the CPU of children
	// the process has waited for (recursively, theirs included).
	own, children uint64
}

// parseProcStat parses "pid (comm) state ppid pgrp ... utime stime cutime
// cstime ... starttime ...". comm may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseProcStat(s string) (procStat, error) {
	open := strings.IndexByte(s, '(')
	closing := strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("parse process stat %q: no command name in parentheses", s)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("parse process stat pid: %w", err)
	}
	f := strings.Fields(s[closing+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	const (
		ppidF, utimeF, stimeF, cutimeF, cstimeF, startF = 4, 14, 15, 16, 17, 22
	)
	if len(f) <= startF-3 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parse process stat of pid %d: %d fields after the command name, want at least %d", pid, len(f), startF-2)
	}
	num := func(field int) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = strconv.ParseUint(f[field-3], 10, 64)
		if err != nil {
			err = fmt.Errorf("parse process stat of pid %d, field %d: %w", pid, field, err)
		}
		return v
	}
	p := procStat{pid: pid, state: f[0][0]}
	p.ppid = int(num(ppidF))
	p.own = num(utimeF) + num(stimeF)
	p.children = num(cutimeF) + num(cstimeF)
	p.start = num(startF)
	if err != nil {
		return procStat{}, err
	}
	return p, nil
}

// readProc reads /proc/<pid>/stat under root. The error wraps
// [os.ErrNotExist] when the process is gone.
func readProc(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	return parseProcStat(string(b))
}

// readAll reads every process under root. Processes that exit meanwhile are
// skipped; the error is only for root itself.
func readAll(root string) (map[int]procStat, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	out := make(map[int]procStat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(root, pid); err == nil {
			out[pid] = p
		}
	}
	return out, nil
}

// machineStat is the first ("cpu ") line of /proc/stat, in ticks summed
// over every core, and the number of "cpuN" lines.
type machineStat struct {
	cores int
	// busy is user+nice+system+irq+softirq+steal (steal: the hypervisor
	// gave the time to another guest, so it was not ours to use); idle is
	// idle+iowait. guest time is already inside user and nice.
	busy, idle, steal uint64
}

// total is every tick the cores counted.
func (m machineStat) total() uint64 { return m.busy + m.idle }

// parseMachineStat parses /proc/stat.
func parseMachineStat(s string) (machineStat, error) {
	var m machineStat
	found := false
	for line := range strings.SplitSeq(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			if _, err := strconv.Atoi(f[0][3:]); err == nil {
				m.cores++
			}
			continue
		}
		if len(f) < 9 {
			return machineStat{}, fmt.Errorf("parse /proc/stat: cpu line has %d fields, want at least 9", len(f))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return machineStat{}, fmt.Errorf("parse /proc/stat cpu field %d: %w", i+1, err)
			}
			v[i] = n
		}
		user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
		m.busy = user + nice + system + irq + softirq + steal
		m.idle = idle + iowait
		m.steal = steal
		found = true
	}
	if !found {
		return machineStat{}, errors.New("parse /proc/stat: no cpu line")
	}
	if m.cores == 0 {
		m.cores = 1
	}
	return m, nil
}

// readMachine reads root/stat.
func readMachine(root string) (machineStat, error) {
	b, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return machineStat{}, fmt.Errorf("read machine CPU times: %w", err)
	}
	return parseMachineStat(string(b))
}

// treeTicks sums own+children ticks of root and every live descendant in
// procs (zombies included: their time is not yet in their parent's
// children figure). A child's CPU moves into its parent's children figure
// when the parent reaps it, so the sum does not drop when a descendant
// exits. ok is false when root is not in procs.
func treeTicks(procs map[int]procStat, kids map[int][]int, root int) (ticks uint64, ok bool) {
	if _, ok := procs[root]; !ok {
		return 0, false
	}
	seen := map[int]bool{}
	stack := []int{root}
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		q := procs[pid]
		ticks += q.own + q.children
		stack = append(stack, kids[pid]...)
	}
	return ticks, true
}

// children maps each pid of procs to its children.
func children(procs map[int]procStat) map[int][]int {
	kids := make(map[int][]int, len(procs))
	for pid, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], pid)
	}
	return kids
}
