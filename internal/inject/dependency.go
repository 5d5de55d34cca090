package inject

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/proctree"
)

// postgresDirPrefix is dependencies.PostgresDirPrefix: cleanup removes only
// directories named like the ones a throwaway PostgreSQL lives in.
const postgresDirPrefix = "drill-pg-"

// postgresGoneWait bounds how long [Cleanup] waits for the killed
// processes of a throwaway PostgreSQL to disappear.
const postgresGoneWait = 10 * time.Second

// PostgresEntry is the journal entry of a throwaway PostgreSQL cluster a
// run started ([KindPostgres], key "postgres/<dependency>"). Journal it with
// [OpApply] as soon as its temp dir exists (postmaster zero) and again
// when its postmaster started (superseding the first), and with [OpRevert]
// once the run stopped the cluster and removed dir. A run killed in
// between leaves the entry pending, and [Cleanup] removes the cluster.
func PostgresEntry(op, dependency, dir string, postmaster proctree.ID) Entry {
	e := Entry{Op: op, Key: KindPostgres + "/" + dependency, Kind: KindPostgres, Dependency: dependency, Dir: dir}
	if postmaster.PID > 0 {
		e.PGID = postmaster.PID
		e.Procs = []proctree.ID{postmaster}
	}
	return e
}

// undoPostgres removes the throwaway PostgreSQL of entry e, left by a run
// that was killed: every process working in its dir, and the journaled
// postmaster while it is still the same process, is continued (a process
// pause may have stopped it; SIGCONT) and killed (SIGKILL: the cluster is
// thrown away, nothing in it is kept); once none remains the dir is
// removed. detail says what was done; gone is true when neither a process
// nor the dir was left. It refuses a dir that is not absolute, not clean,
// not named drill-pg-* or not a directory, so that a damaged journal never
// removes anything else.
func undoPostgres(ctx context.Context, e Entry) (detail string, gone bool, err error) {
	dir := e.Dir
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(filepath.Base(dir), postgresDirPrefix) {
		return "", false, fmt.Errorf("refusing to remove %q: not an absolute, clean path named %s*", dir, postgresDirPrefix)
	}
	fi, statErr := os.Lstat(dir)
	switch {
	case statErr == nil && !fi.IsDir():
		return "", false, fmt.Errorf("refusing to remove %s: not a directory (%s)", dir, fi.Mode().Type())
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return "", false, fmt.Errorf("check %s: %w", dir, statErr)
	}
	procs, err := postgresProcs(dir, e.Procs)
	if err != nil {
		return "", false, err
	}
	if len(procs) == 0 && statErr != nil {
		return "", true, nil
	}
	killed, err := killAll(ctx, dir, procs, e.Procs)
	if err != nil {
		return "", false, err
	}
	var size int64
	if statErr == nil {
		size = dirSize(dir)
		if err := os.RemoveAll(dir); err != nil {
			return "", false, fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	parts := []string{}
	if killed > 0 {
		parts = append(parts, fmt.Sprintf("continued and killed %d processes", killed))
	} else {
		parts = append(parts, "no process left")
	}
	if statErr == nil {
		parts = append(parts, fmt.Sprintf("removed the directory (%.1f MB)", float64(size)/1e6))
	} else {
		parts = append(parts, "directory already gone")
	}
	return strings.Join(parts, ", "), false, nil
}

// postgresProcs lists the processes of a cluster: those working in dir and
// those of journaled that are still the same processes.
func postgresProcs(dir string, journaled []proctree.ID) ([]proctree.ID, error) {
	var procs []proctree.ID
	for _, id := range journaled {
		if id.PID > 1 && proctree.Same(id) {
			procs = append(procs, id)
		}
	}
	in, err := proctree.InDir(dir)
	if err != nil {
		return nil, fmt.Errorf("find the processes of %s: %w", dir, err)
	}
	procs, _ = mergeIDs(procs, in)
	return procs, nil
}

// killAll continues and kills procs, then waits (bounded by
// [postgresGoneWait] and ctx) until no process of the cluster remains,
// killing any that appear meanwhile. It returns how many it killed.
func killAll(ctx context.Context, dir string, procs, journaled []proctree.ID) (int, error) {
	killed := map[proctree.ID]bool{}
	deadline := time.Now().Add(postgresGoneWait)
	for {
		for _, id := range procs {
			if id.PID <= 1 || id.PID == os.Getpid() || !proctree.Same(id) {
				continue
			}
			_ = syscall.Kill(id.PID, syscall.SIGCONT)
			if syscall.Kill(id.PID, syscall.SIGKILL) == nil {
				killed[id] = true
			}
		}
		var err error
		if procs, err = postgresProcs(dir, journaled); err != nil {
			return len(killed), err
		}
		if len(procs) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return len(killed), fmt.Errorf("processes %v of %s still alive after SIGKILL", procs, dir)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dirSize is the total size of the regular files under dir (best effort).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
