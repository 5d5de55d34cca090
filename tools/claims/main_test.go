package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun writes the ledger of internal/claims' fixture repository, then
// -check says it is up to date; after a change to the ledger -check exits
// 1, and a data file with a problem exits 2 naming its file and line.
func TestRun(t *testing.T) {
	fixture := filepath.Join("..", "..", "internal", "claims", "testdata")
	root := t.TempDir()
	for _, rel := range []string{"docs/claims/claims.yaml", "scenarios/pool.yaml", "scenarios/pool-naive.yaml"} {
		b, err := os.ReadFile(filepath.Join(fixture, "repo", rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specs := filepath.Join(fixture, "specs")
	call := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"-root", root, "-specs", specs}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := call(); code != 0 || !strings.Contains(out, "wrote docs/CLAIMS.md") {
		t.Fatalf("write: exit %d: %s", code, out)
	}
	if code, out := call("-check"); code != 0 {
		t.Fatalf("check after write: exit %d: %s", code, out)
	}
	ledger := filepath.Join(root, "docs", "CLAIMS.md")
	if err := os.WriteFile(ledger, []byte("# edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := call("-check"); code != 1 || !strings.Contains(out, "docs/CLAIMS.md is stale; run: make claims") {
		t.Fatalf("check after a hand edit: exit %d: %s", code, out)
	}
	data := filepath.Join(root, "docs", "claims", "claims.yaml")
	b, _ := os.ReadFile(data)
	if err := os.WriteFile(data, bytes.Replace(b, []byte("kind: decision"), []byte("kind: hope"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := call(); code != 2 || !strings.Contains(out, `docs/claims/claims.yaml:22: DEC-PL-01: kind "hope"`) {
		t.Fatalf("bad data file: exit %d: %s", code, out)
	}
}
