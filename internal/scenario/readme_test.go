package scenario

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	refBegin = "<!-- BEGIN scenario-reference -->\n"
	refEnd   = "<!-- END scenario-reference -->"
)

// TestReadmeReference keeps the README's scenario reference in sync with
// types.go (through zz_docs.go). With -update it rewrites the section.
func TestReadmeReference(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i, j := strings.Index(text, refBegin), strings.Index(text, refEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q ... %q markers", strings.TrimSpace(refBegin), refEnd)
	}
	var ref bytes.Buffer
	if err := WriteReference(&ref); err != nil {
		t.Fatal(err)
	}
	want := text[:i+len(refBegin)] + "\n" + ref.String() + text[j:]
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if text != want {
		t.Fatal("the README's scenario reference is stale; run: go test ./internal/scenario -run TestReadme -update")
	}
}
