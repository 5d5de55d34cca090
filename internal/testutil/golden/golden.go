// Package golden compares test output with golden files (STYLE: golden
// files under testdata/). It imports no drill package, so any package's
// tests may use it.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the golden file at path. With update it writes
// got there instead (creating the directory) and passes. An unreadable
// file fails tb at once; a difference fails tb and lets the test go on,
// showing got and want.
func Check(tb testing.TB, path string, got []byte, update bool) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatalf("create golden directory: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatalf("write golden file: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(want, got) {
		tb.Errorf("%s differs (run go test -update to accept after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
