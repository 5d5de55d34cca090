package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadPathUnfinished: a report directory a killed run left (its
// per-second journal, no run.json) is refused with the command that writes
// its reports, not as a missing file.
func TestLoadPathUnfinished(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, JournalFile), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := LoadPath(dir)
	if !errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "drill report "+dir) {
		t.Fatalf("LoadPath(killed run's dir) = %v, want ErrUnfinished naming drill report %s", err, dir)
	}
	empty := t.TempDir()
	if _, _, err := LoadPath(empty); err == nil || errors.Is(err, ErrUnfinished) || !strings.Contains(err.Error(), "run.json") {
		t.Fatalf("LoadPath(empty dir) = %v, want a read error naming run.json", err)
	}
	if _, _, err := LoadPath(filepath.Join(empty, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("LoadPath(missing) = %v, want an error naming the path", err)
	}
}
