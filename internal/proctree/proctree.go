// Package proctree finds and signals a local process tree on Linux: every
// process of a process group plus all their descendants, whatever session or
// group those descendants moved to.
//
// It exists because signalling a process group is not enough for servers that
// re-parent work into new sessions: PostgreSQL's postmaster starts each child
// (backends, checkpointer, walwriter, ...) with setsid(), so SIGSTOP to the
// postmaster's group freezes only the postmaster while open connections keep
// being served. [Stop] and [Cont] walk the parent links in /proc instead.
package proctree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Proc is one line of /proc/<pid>/stat, reduced to what a tree walk needs.
type Proc struct {
	PID, PPID, PGID int
	// State is the one-letter state: R, S, D, T (stopped), Z (zombie), ...
	State byte
	// Comm is the executable name (at most 15 bytes).
	Comm string
	// Start is the start time in clock ticks after boot (field 22 of
	// /proc/<pid>/stat; 0 if the line was too short). With PID it names a
	// process across PID reuse.
	Start uint64
}

// ID names one process across PID reuse: its PID and its start time in
// clock ticks after boot. It is what a journal keeps, so that a process is
// signalled later only if it is still the same one.
type ID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// ID returns p's [ID].
func (p Proc) ID() ID { return ID{PID: p.PID, Start: p.Start} }

// procRoot is where the process table is mounted.
const procRoot = "/proc"

// Snapshot reads every process of the machine (its PID namespace) from /proc.
// Processes that exit while it reads are skipped. Errors only when /proc
// itself cannot be read.
func Snapshot() (map[int]Proc, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", procRoot, err)
	}
	out := make(map[int]Proc, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := Read(pid)
		if err != nil {
			continue // gone meanwhile
		}
		out[pid] = p
	}
	return out, nil
}

// Read parses /proc/<pid>/stat. It returns an error wrapping
// [os.ErrNotExist] when the process does not exist.
func Read(pid int) (Proc, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Proc{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	return parseStat(string(b))
}

// parseStat parses "pid (comm) state ppid pgrp ...". comm may contain spaces
// and parentheses, so the fields are found after the last ')'.
func parseStat(s string) (Proc, error) {
	open := strings.IndexByte(s, '(')
	closing := strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return Proc{}, fmt.Errorf("parse process stat %q: no comm", s)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return Proc{}, fmt.Errorf("parse process stat pid: %w", err)
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return Proc{}, fmt.Errorf("parse process stat %q: too few fields", s)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return Proc{}, fmt.Errorf("parse process stat: %w", err)
	}
	p := Proc{PID: pid, PPID: ppid, PGID: pgid, State: f[0][0], Comm: s[open+1 : closing]}
	const startField = 22 - 3 // fields are numbered from 1; f starts at field 3
	if len(f) > startField {
		if p.Start, err = strconv.ParseUint(f[startField], 10, 64); err != nil {
			return Proc{}, fmt.Errorf("parse process stat start time: %w", err)
		}
	}
	return p, nil
}

// Tree returns the PIDs of every live (non-zombie) process in group pgid and
// of all their descendants, sorted. An empty result means the group is gone.
func Tree(pgid int) ([]int, error) {
	procs, err := Snapshot()
	if err != nil {
		return nil, err
	}
	return treeOf(procs, pgid), nil
}

func treeOf(procs map[int]Proc, pgid int) []int {
	// Group 0 is "no group" (kernel threads) and group 1 is init's: the
	// "tree" of either is the whole machine. Never return it: a caller that
	// signals the result would stop or kill every process.
	if pgid <= 1 {
		return nil
	}
	children := map[int][]int{}
	in := map[int]bool{}
	var queue []int
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
		if p.PGID == pgid {
			in[p.PID] = true
			queue = append(queue, p.PID)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !in[c] {
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	out := make([]int, 0, len(in))
	for pid := range in {
		if procs[pid].State != 'Z' {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// TreeIDs is [Tree] with each process's start time: the IDs of every live
// process in group pgid and of all their descendants, sorted by PID.
func TreeIDs(pgid int) ([]ID, error) {
	procs, err := Snapshot()
	if err != nil {
		return nil, err
	}
	pids := treeOf(procs, pgid)
	out := make([]ID, 0, len(pids))
	for _, pid := range pids {
		out = append(out, procs[pid].ID())
	}
	return out, nil
}

// IDs reads the start time of each pid and returns the IDs of those still
// alive (not zombies), in the order given.
func IDs(pids []int) []ID {
	out := make([]ID, 0, len(pids))
	for _, pid := range pids {
		if p, err := Read(pid); err == nil && p.State != 'Z' {
			out = append(out, p.ID())
		}
	}
	return out
}

// Same reports whether id's process still exists, is not a zombie and
// started at the same time (its PID was not reused).
func Same(id ID) bool {
	p, err := Read(id.PID)
	return err == nil && p.State != 'Z' && p.Start == id.Start
}

// ContIDs sends SIGCONT to every process of ids that is still the same
// process ([Same]); a PID now used by another process is left alone. When
// the group leader pgid is among them and still the same, the group and its
// current tree are continued too (children forked after ids was taken). It
// works when the leader is gone: its former children, re-parented and in
// their own sessions, are continued through ids. It returns the IDs it
// continued; errors only when /proc cannot be read.
func ContIDs(pgid int, ids []ID) ([]ID, error) {
	var done []ID
	leader := false
	for _, id := range ids {
		if id.PID <= 1 || !Same(id) {
			continue
		}
		if err := syscall.Kill(id.PID, syscall.SIGCONT); err != nil {
			continue // exited meanwhile
		}
		done = append(done, id)
		if id.PID == pgid {
			leader = true
		}
	}
	if leader && pgid > 1 {
		if err := Cont(pgid, nil); err != nil {
			return done, err
		}
	}
	return done, nil
}

// InDir returns the IDs of the live (non-zombie) processes whose working
// directory is dir or lies under it, sorted by PID; dir must be absolute.
// A working directory removed meanwhile still counts (the kernel shows it
// with " (deleted)"). Processes whose working directory cannot be read
// (another user's, without privilege) are skipped. Errors only when /proc
// cannot be read.
func InDir(dir string) ([]ID, error) {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) || dir == "/" {
		return nil, fmt.Errorf("processes in %q: want an absolute directory other than /", dir)
	}
	procs, err := Snapshot()
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(procs))
	for pid, p := range procs {
		if p.State == 'Z' || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(pid), "cwd"))
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	out := make([]ID, 0, len(pids))
	for _, pid := range pids {
		out = append(out, procs[pid].ID())
	}
	return out, nil
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	p, err := Read(pid)
	return err == nil && p.State != 'Z'
}

// Stop sends SIGSTOP to group pgid and then to every descendant, repeating
// the walk until it finds no process it has not stopped (a process may fork
// between a walk and its stop; stopping the parents first makes that
// converge). It returns the PIDs it stopped, to be passed to [Cont].
// Errors: the group does not exist (wrapping [syscall.ESRCH]), or /proc
// cannot be read.
func Stop(pgid int) ([]int, error) {
	if pgid <= 1 {
		return nil, fmt.Errorf("stop process group %d: refusing a group id <= 1", pgid)
	}
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("stop process group %d: %w", pgid, err)
	}
	stopped := map[int]bool{}
	for round := 0; round < 20; round++ {
		pids, err := Tree(pgid)
		if err != nil {
			return sortedKeys(stopped), err
		}
		fresh := 0
		for _, pid := range pids {
			if stopped[pid] {
				continue
			}
			fresh++
			stopped[pid] = true
			_ = syscall.Kill(pid, syscall.SIGSTOP) // ESRCH: it exited meanwhile
		}
		if fresh == 0 {
			break
		}
	}
	return sortedKeys(stopped), nil
}

// Cont sends SIGCONT to group pgid, to every current descendant, and to each
// of extra (the PIDs [Stop] returned; they may have been re-parented since).
// Processes that no longer exist are skipped. It errors only when /proc
// cannot be read and nothing could be continued.
func Cont(pgid int, extra []int) error {
	var errs []error
	if pgid > 1 {
		if err := syscall.Kill(-pgid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("continue process group %d: %w", pgid, err))
		}
	}
	for _, pid := range extra {
		if pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	if pgid > 1 {
		pids, err := Tree(pgid)
		if err != nil {
			errs = append(errs, err)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	return errors.Join(errs...)
}

// Kill sends SIGKILL to group pgid, to every current descendant and to each
// of extra. Missing processes are skipped.
func Kill(pgid int, extra []int) {
	pids, _ := Tree(pgid)
	if pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for _, pid := range append(pids, extra...) {
		if pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
