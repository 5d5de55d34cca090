package record_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/record"
)

// TestWriteFile: WriteFile replaces the file whole, in its own directory
// (also for a path without one), and a failed write names the file and
// leaves nothing behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, content := range []string{"first", "second"} {
		if err := record.WriteFile("run.json", "run record", []byte(content)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "run.json"))
		if err != nil || string(b) != content {
			t.Fatalf("run.json = %q, %v; want %q", b, err, content)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "run.json"))
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("run.json mode %v, %v; want 0644", st.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want run.json alone: %v", len(entries), entries)
	}

	missing := filepath.Join(dir, "no", "such", "run.summary.json")
	err = record.WriteFile(missing, "run summary", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "write run summary "+missing) {
		t.Errorf("WriteFile into a missing directory: %v; want an error naming %s", err, missing)
	}
	// A directory in the file's place: the rename fails after the
	// temporary file was written, and that file is removed.
	if err := os.Mkdir(filepath.Join(dir, "taken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "taken", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteFile(filepath.Join(dir, "taken"), "metrics file", []byte("x")); err == nil {
		t.Error("WriteFile over a non-empty directory: no error")
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("a failed write left files behind: %v", entries)
	}
}
