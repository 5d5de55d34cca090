package docs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/claims"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// claimsData is the ledger's data file, relative to the repository root.
const claimsData = "docs/claims/claims.yaml"

// specsDir is where the source documents are: shared/specs in the
// repository's parent directory, on a developer's machine as in CI.
func specsDir(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "..", "shared", "specs")
	_, err := os.Stat(dir)
	needs.Part(t, "the source documents in ../shared/specs (the claims ledger's input)", err)
	return dir
}

// TestClaimsLedger ties docs/CLAIMS.md to the four source documents and
// the shipped scenarios: every clause id a document writes must be in the
// data file and every quote in its document, every id an assertion's
// source names must be a claim, every naive twin must declare
// expect.fail, and docs/CLAIMS.md must be exactly what `make claims`
// writes now.
func TestClaimsLedger(t *testing.T) {
	root := repoRoot(t)
	want, err := claims.Generate(root, claimsData, specsDir(t, root))
	var ps claims.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			t.Error(p.String())
		}
		t.FailNow()
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "CLAIMS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/CLAIMS.md differs from what the generator writes now; run: %s", claims.Command)
	}
}

// ledgerRefRE matches a drill's link and its assertions in a ledger row:
// [name](../scenarios/x.yaml): `a`, `b`.
var ledgerRefRE = regexp.MustCompile("\\[[^\\]]+\\]\\(\\.\\./(scenarios/[^)]+\\.yaml)\\)(?:: ((?:`[^`]+`(?:, )?)+))?")

// TestClaimsLedgerNamesRealAssertions reads docs/CLAIMS.md as committed:
// every scenario a row links must exist and every assertion it names
// after the link must be an assertion of that scenario (or, after
// "claim", one of its claims).
func TestClaimsLedgerNamesRealAssertions(t *testing.T) {
	root := repoRoot(t)
	ledger, err := os.ReadFile(filepath.Join(root, "docs", "CLAIMS.md"))
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]*scenario.Scenario{}
	refs := 0
	for _, m := range ledgerRefRE.FindAllStringSubmatch(string(ledger), -1) {
		path := m[1]
		s, ok := loaded[path]
		if !ok {
			s, err = scenario.Load(filepath.Join(root, filepath.FromSlash(path)))
			if err != nil {
				t.Errorf("docs/CLAIMS.md names %s, which does not load: %v", path, err)
				loaded[path] = nil
				continue
			}
			loaded[path] = s
		}
		if s == nil || m[2] == "" {
			continue
		}
		for _, name := range strings.Split(m[2], ", ") {
			name = strings.Trim(name, "`")
			refs++
			if !hasAssertion(s, name) {
				t.Errorf("docs/CLAIMS.md names assertion %s of %s, which has none by that name", name, path)
			}
		}
	}
	if refs < 20 {
		t.Errorf("docs/CLAIMS.md names %d assertions, want at least 20: the rows' format changed under this test", refs)
	}
}

// hasAssertion reports whether s has an assertion named name.
func hasAssertion(s *scenario.Scenario, name string) bool {
	for _, a := range s.Assertions {
		if a.Name == name {
			return true
		}
	}
	return false
}
