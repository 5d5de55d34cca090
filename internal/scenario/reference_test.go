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

// TestReferenceDoc keeps the scenario reference in docs/reference.md in
// sync with the types' doc comments (through zz_docs.go) and the kinds'
// specs. With -update it rewrites the part between the markers.
func TestReferenceDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "reference.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, refBegin), strings.Index(text, refEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/reference.md lacks the %q ... %q markers", strings.TrimSpace(refBegin), refEnd)
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
		t.Fatal("docs/reference.md, the scenario reference, is stale; run: go test ./internal/scenario -run TestReferenceDoc -update")
	}
}
