package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// e2eRE reads the Makefile's E2E_PACKAGES line.
var e2eRE = regexp.MustCompile(`(?m)^E2E_PACKAGES\s*:=\s*(.*)$`)

// TestMakefileListsE2EPackages checks that make test runs every Go package
// under test/ (the Makefile names them one by one, in the order that lets
// build/prebuild.sh finish the Kubernetes parts before test/cluster), so a
// new end-to-end package cannot be left out of CI by accident. test/controlplane
// is a module of its own, run by its own line of the test recipe.
func TestMakefileListsE2EPackages(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := e2eRE.FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no E2E_PACKAGES line")
	}
	listed := strings.Fields(string(m[1]))
	entries, err := os.ReadDir(filepath.Join("..", "test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join("..", "test", e.Name())
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			continue // a module of its own
		}
		goFiles, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(goFiles) == 0 {
			continue
		}
		if !slices.Contains(listed, "./test/"+e.Name()) {
			t.Errorf("Makefile: E2E_PACKAGES (%s) lacks ./test/%s: make test would not run it", strings.Join(listed, " "), e.Name())
		}
	}
	for _, p := range listed {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("Makefile: E2E_PACKAGES names %s, which does not exist", p)
		}
	}
}
