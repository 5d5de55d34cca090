package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/testutil/testproc"
)

const module = "github.com/drillhq/drill"

// designFile is DESIGN.md beside this test.
const designFile = "DESIGN.md"

var (
	// headingRE matches a numbered section heading: "## 12. Title" or
	// "### 2.1 Title".
	headingRE = regexp.MustCompile(`^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s`)
	// mapRowRE matches a row of the package map: "| `internal/app` | ...".
	mapRowRE = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")
	// citeRE matches a citation in the one accepted form, "DESIGN.md §N"
	// (usually "docs/DESIGN.md §N"), with any further "§M" joined by
	// commas, "and" or "or", also across comment lines.
	citeRE = regexp.MustCompile(`DESIGN\.md((?:(?:[\s/#*,]|\band\b|\bor\b)*§\d+(?:\.\d+)*)+)`)
	// sectionRE reads one "§N" reference.
	sectionRE = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
	// oldCiteRE matches the forms written before docs/DESIGN.md existed
	// ("DESIGN section 4", "DESIGN sections 2 and 7", "DESIGN 7a",
	// "DESIGN §8"): their numbers named sections of another document.
	oldCiteRE = regexp.MustCompile(`DESIGN(?:\.md)?(?:[\s/#*]|\n)*(?:sections?\b|\d)|DESIGN\s*§`)
	// issueRE matches an issue number in a comment: "issue 7", "issue #558",
	// "(#12)", "PR 31".
	issueRE = regexp.MustCompile(`(?i)\bissues?\s+#?\d+|\(#\d+\)|\bPR\s+#?\d+`)
)

// repoRoot is the module's root directory (the parent of docs/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod in %s: %v", root, err)
	}
	return root
}

// sections returns the section numbers DESIGN.md has ("1", "2", "2.1", ...)
// and the lines of the section whose number is want.
func sections(t *testing.T, want string) (map[string]bool, []string) {
	t.Helper()
	f, err := os.Open(designFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	have := map[string]bool{}
	var body []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := headingRE.FindStringSubmatch(line); m != nil {
			have[m[1]] = true
			in = m[1] == want || strings.HasPrefix(m[1], want+".")
			if in {
				continue
			}
		} else if strings.HasPrefix(line, "## ") {
			in = false
		}
		if in {
			body = append(body, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return have, body
}

// TestPackageMap: the package map of DESIGN.md §2 lists exactly the
// packages of `go list ./...`.
func TestPackageMap(t *testing.T) {
	_, body := sections(t, "2")
	documented := map[string]bool{}
	for _, line := range body {
		if m := mapRowRE.FindStringSubmatch(line); m != nil {
			if documented[m[1]] {
				t.Errorf("DESIGN.md §2 lists %s twice", m[1])
			}
			documented[m[1]] = true
		}
	}
	if len(documented) == 0 {
		t.Fatal("DESIGN.md §2 has no package map (rows like | `internal/app` | job |)")
	}

	listed := map[string]bool{}
	for p := range goList(t) {
		listed[p] = true
	}
	var missing, extra []string
	for p := range listed {
		if !documented[p] {
			missing = append(missing, p)
		}
	}
	for p := range documented {
		if !listed[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("packages missing from the package map in docs/DESIGN.md §2 (add a row with the package's job):\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("docs/DESIGN.md §2 lists packages that `go list ./...` does not (renamed or removed?):\n  %s", strings.Join(extra, "\n  "))
	}
}

// goList runs `go list ./...` in the module and returns each package, by
// its path relative to the module ("internal/app"), with the drill packages
// its non-test files import (same form).
func goList(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command(testproc.GoTool(), "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.Bytes())
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p, _ := rel(f[0])
		var imports []string
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				imports = append(imports, r)
			}
		}
		pkgs[p] = imports
	}
	return pkgs
}

// layerRowRE matches a row of the layer table: "| 3 | what | `a`, `b` |".
var layerRowRE = regexp.MustCompile(`^\|\s*(\d+)\s*\|[^|]*\|(.*)\|\s*$`)

// TestLayers: every package is in exactly one layer of DESIGN.md §2.1, and
// no package imports (outside its tests) a package of a higher layer.
func TestLayers(t *testing.T) {
	_, body := sections(t, "2.1")
	layer := map[string]int{}
	for _, line := range body {
		m := layerRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[2], -1) {
			if _, dup := layer[p[1]]; dup {
				t.Errorf("docs/DESIGN.md §2.1 puts %s in two layers", p[1])
			}
			layer[p[1]] = n
		}
	}
	if len(layer) == 0 {
		t.Fatal("docs/DESIGN.md §2.1 has no layer table (rows like | 3 | what | `internal/inject`, ... |)")
	}
	pkgs := goList(t)
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		lp, ok := layer[p]
		if !ok {
			t.Errorf("%s is in no layer of docs/DESIGN.md §2.1: add it to the layer whose packages it may import", p)
			continue
		}
		for _, imp := range pkgs[p] {
			if li, ok := layer[imp]; ok && li > lp {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import back up the layers of docs/DESIGN.md §2.1", p, lp, imp, li)
			}
		}
	}
	for p := range layer {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("docs/DESIGN.md §2.1 lists %s, which `go list ./...` does not", p)
		}
	}
}

// citations returns the sections cited in text ("docs/DESIGN.md §N"), and
// the citations written in an older form, which must be rewritten.
func citations(text string) (refs []string, old []string) {
	for _, m := range citeRE.FindAllStringSubmatch(text, -1) {
		for _, r := range sectionRE.FindAllStringSubmatch(m[1], -1) {
			refs = append(refs, r[1])
		}
	}
	for _, loc := range oldCiteRE.FindAllStringIndex(text, -1) {
		end := min(len(text), loc[1]+16)
		old = append(old, strings.Join(strings.Fields(text[loc[0]:end]), " "))
	}
	return refs, old
}

// citingFiles lists the files that may cite the design document: every
// file git tracks, plus untracked Go and Markdown files, outside testdata,
// reports and vendored trees.
func citingFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") && name != ".ci" || name == "testdata" || name == "reports" || name == "vendor" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".md", ".yaml", ".yml", ".sh", ".tmpl":
			files = append(files, path)
		default:
			if name == "Makefile" || name == "run" {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCitations: every "docs/DESIGN.md §N" in the repository, and every
// "§N" inside DESIGN.md, names a section DESIGN.md has; no citation is left
// in an older form ("DESIGN section N"), whose numbers meant other sections.
func TestCitations(t *testing.T) {
	have, _ := sections(t, "")
	root := repoRoot(t)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range citingFiles(t, root) {
		if filepath.Dir(path) == self && filepath.Ext(path) == ".go" {
			continue // this test and its package doc quote the forms it checks
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		refs, old := citations(string(b))
		if rel == filepath.Join("docs", designFile) {
			refs = nil
			for _, m := range sectionRE.FindAllStringSubmatch(string(b), -1) {
				refs = append(refs, m[1])
			}
		}
		for _, c := range old {
			t.Errorf("%s: %q: cite the section of docs/DESIGN.md that says it, as docs/DESIGN.md §N", rel, c)
		}
		for _, r := range refs {
			if !have[r] {
				t.Errorf("%s: cites docs/DESIGN.md §%s, which does not exist (its sections: %s)", rel, r, sortedKeys(have))
			}
		}
	}
}

// TestNoIssueNumbersInComments: Go comments say what the code does, not
// which issue asked for it.
func TestNoIssueNumbersInComments(t *testing.T) {
	root := repoRoot(t)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range citingFiles(t, root) {
		if filepath.Ext(path) != ".go" || filepath.Dir(path) == self {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			_, comment, ok := strings.Cut(line, "//")
			if !ok {
				continue
			}
			if m := issueRE.FindString(comment); m != "" {
				t.Errorf("%s:%d: a comment cites %q: say what the code does instead", rel, i+1, m)
			}
		}
	}
}

func TestCitationParsing(t *testing.T) {
	for _, c := range []struct {
		text      string
		refs, old []string
	}{
		{"see docs/DESIGN.md §12.", []string{"12"}, nil},
		{"(docs/DESIGN.md §2.1 and §15)", []string{"2.1", "15"}, nil},
		{"(docs/DESIGN.md §3, §7,\n// §11)", []string{"3", "7", "11"}, nil},
		{"docs/DESIGN.md, the design document itself", nil, nil},
		{"cite as docs/DESIGN.md §N", nil, nil},
		{"(DESIGN sections 2 and 7)", nil, []string{"DESIGN sections 2 and 7)"}},
		{"(DESIGN\n// section 4a): for", nil, []string{"DESIGN // section 4a): for"}},
		{"the graded ladder of DESIGN 7a.", nil, []string{"DESIGN 7a."}},
		{"Safety (DESIGN §8)", nil, []string{"DESIGN §8)"}},
	} {
		refs, old := citations(c.text)
		if !slices.Equal(refs, c.refs) || len(old) != len(c.old) {
			t.Errorf("citations(%q) = %q, old forms %q; want %q, old forms %q", c.text, refs, old, c.refs, c.old)
		}
	}
	for _, text := range []string{"// (issue 7): x", "// Toxiproxy issue #558", "// fixed in (#12)"} {
		if !issueRE.MatchString(text) {
			t.Errorf("issue number in %q not found", text)
		}
	}
	if issueRE.MatchString("// the issuer and #1 of 3") {
		t.Error("issueRE matches text without an issue number")
	}
}

func sortedKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return sectionLess(keys[i], keys[j]) })
	return strings.Join(keys, ", ")
}

// sectionLess orders "2" < "2.1" < "10".
func sectionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if len(as[i]) != len(bs[i]) {
			return len(as[i]) < len(bs[i])
		}
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}
