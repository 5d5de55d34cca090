package inject

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/proctree"
)

func TestPostgresDirPrefixMatchesDeps(t *testing.T) {
	if postgresDirPrefix != dependencies.PostgresDirPrefix {
		t.Fatalf("cleanup removes %s* dirs, PostgreSQL lives in %s*", postgresDirPrefix, dependencies.PostgresDirPrefix)
	}
}

// journalPostgres writes a killed run's journal holding one throwaway
// PostgreSQL in dir, and returns the state dir and the run id.
func journalPostgres(t *testing.T, dir string, postmaster proctree.ID) (string, string) {
	t.Helper()
	state := t.TempDir()
	run := "20260101.000000.abcdef"
	j, err := OpenJournal(state, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(PostgresEntry(OpApply, "db", dir, postmaster)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	return state, run
}

// TestCleanupRemovesKilledPostgres: a run killed while its throwaway
// PostgreSQL ran (and was paused) leaves the cluster's temp dir and stopped
// processes working in it. Cleanup continues and kills those processes,
// removes the dir, says so, and closes the journal entry.
func TestCleanupRemovesKilledPostgres(t *testing.T) {
	dir, err := os.MkdirTemp("", dependencies.PostgresDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "base"), make([]byte, 300_000), 0o600); err != nil {
		t.Fatal(err)
	}
	// A stand-in for an orphaned backend: a real process working in the
	// data dir, stopped as a process pause leaves it.
	worker := exec.Command("sleep", "300")
	worker.Dir = data
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = worker.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = worker.Process.Kill(); <-reaped })
	if err := syscall.Kill(worker.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "worker stopped", func() bool {
		p, err := proctree.Read(worker.Process.Pid)
		return err == nil && p.State == 'T'
	})
	state, run := journalPostgres(t, dir, proctree.ID{})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: run})
	if err != nil || len(rep.Removed) != 1 || len(rep.Gone)+len(rep.Failed) != 0 {
		t.Fatalf("Cleanup = %+v, %v; want the cluster removed", rep, err)
	}
	got := rep.Removed[0].String()
	for _, want := range []string{"throwaway PostgreSQL db in " + dir, "continued and killed 1 processes", "removed the directory (0.3 MB)"} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q does not say %q", got, want)
		}
	}
	select {
	case <-reaped:
	case <-time.After(30 * time.Second):
		t.Fatal("the stopped worker was not killed")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s remains: %v", dir, err)
	}
	// Again: the entry is closed, nothing is left to do.
	if rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: run}); err != nil || len(rep.Removed)+len(rep.Gone)+len(rep.Failed) != 0 {
		t.Fatalf("second cleanup: %+v %v", rep, err)
	}
}

// TestCleanupPostgresRefusesOtherDirs: a journal naming a directory that
// is not a throwaway PostgreSQL's (damaged or edited) removes nothing; a
// cluster whose dir is already gone is reported gone.
func TestCleanupPostgresRefusesOtherDirs(t *testing.T) {
	root, err := os.MkdirTemp("", "drill-cleanup-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	precious := filepath.Join(root, "precious")
	if err := os.Mkdir(precious, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, dependencies.PostgresDirPrefix+"link")
	if err := os.Symlink(precious, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, dependencies.PostgresDirPrefix+"file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir string
		gone      bool
	}{
		{"not named drill-pg-*", precious, false},
		{"root", "/", false},
		{"relative", dependencies.PostgresDirPrefix + "x", false},
		{"not clean", root + "/x/../" + dependencies.PostgresDirPrefix + "x", false},
		{"a symlink", link, false},
		{"a file", file, false},
		{"already gone", filepath.Join(root, dependencies.PostgresDirPrefix+"gone"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state, run := journalPostgres(t, tc.dir, proctree.ID{})
			rep, err := Cleanup(context.Background(), CleanupOptions{StateDir: state, RunID: run})
			if tc.gone {
				if err != nil || len(rep.Gone) != 1 {
					t.Fatalf("Cleanup = %+v, %v; want it gone", rep, err)
				}
				return
			}
			if err == nil || len(rep.Failed) != 1 || !strings.Contains(err.Error(), "refusing") {
				t.Fatalf("Cleanup = %+v, %v; want a refusal", rep, err)
			}
			for _, p := range []string{precious, link, file} {
				if _, err := os.Lstat(p); err != nil {
					t.Fatalf("%s was touched: %v", p, err)
				}
			}
		})
	}
}
