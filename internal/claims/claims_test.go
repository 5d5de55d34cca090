package claims

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/ledger.golden.md")

const (
	repo  = "testdata/repo"
	specs = "testdata/specs"
	data  = "docs/claims/claims.yaml"
)

// TestGenerateGolden renders the small ledger of testdata/repo: a claim
// checked by two assertions and failed on by the naive twin, one checked
// with a note and no twin that fails on it, a blocked one, an owner and a
// decision.
func TestGenerateGolden(t *testing.T) {
	got, err := Generate(repo, data, specs)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/ledger.golden.md", got, *update)
}

// writeRepo copies testdata/repo into a temporary directory, with the
// data file replaced by ledger when it is not empty and each file in
// files written over (path relative to the repository -> content).
func writeRepo(t *testing.T, ledger string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(repo, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ledger != "" {
		files[data] = ledger
	}
	for rel, content := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ledgerWith is the fixture's data file with old replaced by new.
func ledgerWith(t *testing.T, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, data))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("the fixture has no %q", old)
	}
	return strings.Replace(string(b), old, new, 1)
}

// scenarioWith is the fixture scenario at rel with old replaced by new.
func scenarioWith(t *testing.T, rel, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, rel))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", rel, old)
	}
	return strings.Replace(string(b), old, new, 1)
}

// TestGenerateProblems: each broken input is refused with a problem that
// names the file, the line where there is one, and the id or field.
func TestGenerateProblems(t *testing.T) {
	naive := "scenarios/pool-naive.yaml"
	correct := "scenarios/pool.yaml"
	for _, tc := range []struct {
		name   string
		ledger string
		files  map[string]string
		want   string
	}{
		{"untestable figure", ledgerWith(t, "        note: \"gated at p90\"\n", "        untestable: \"too hard\"\n"), nil,
			"docs/claims/claims.yaml:11: MC-SH-01.1: a claim of kind figure is testable: untestable is only for an owner, a linter, a process or a decision"},
		{"owner without why", ledgerWith(t, "        untestable: \"who owns the mechanism\"\n", ""), nil,
			"docs/claims/claims.yaml:15: MC-SH-01.2: a claim of kind owner needs an untestable line"},
		{"unknown kind", ledgerWith(t, "kind: decision", "kind: wish"), nil,
			`DEC-PL-01: kind "wish": want one of figure, behaviour, owner, linter, process, decision`},
		{"duplicate id", ledgerWith(t, "id: DEC-PL-01", "id: INV-PL-01"), nil,
			"docs/claims/claims.yaml:22: INV-PL-01: claim id twice (also at line 19)"},
		{"malformed id", ledgerWith(t, "id: DEC-PL-01", "id: dec-1"), nil,
			"dec-1: not a claim id"},
		{"bare and split", ledgerWith(t, "id: INV-PL-01", "id: MC-SH-01"), map[string]string{},
			"MC-SH-01: the clause is both a claim and split into MC-SH-01.n claims"},
		{"misquoted", ledgerWith(t, "within 5 ms.", "within 4 ms."), nil,
			"docs/claims/claims.yaml:11: MC-SH-01.1: the quote is not in pool.md"},
		{"clause missing", ledgerWith(t, "id: DEC-PL-01", "id: POOL-SVC-001.2"), nil,
			"pool.md: DEC-PL-01: clause id of POOL-SVC-001 missing from the ledger"},
		{"blocked but drilled", ledgerWith(t, "        quote: \"Reads stay below 100 ms at p99.\"\n", "        quote: \"Reads stay below 100 ms at p99.\"\n        blocked: \"later\"\n"), nil,
			"INV-PL-01: checked by p99 of scenarios/pool.yaml: drop the blocked line"},
		{"neither drilled nor blocked", ledgerWith(t, "        blocked: \"no drill holds the database yet\"\n", ""), nil,
			"POOL-SVC-001.1: no shipped drill checks this claim: say what blocks it (blocked:)"},
		{"unknown id in a source", "", map[string]string{correct: scenarioWith(t, correct, "source: INV-PL-01\n", "source: INV-PL-02\n")},
			"scenarios/pool.yaml:22: assertions[0].source: INV-PL-02 is no claim of docs/claims/claims.yaml"},
		{"split clause in a source", "", map[string]string{correct: scenarioWith(t, correct, "source: INV-PL-01\n", "source: MC-SH-01\n")},
			"scenarios/pool.yaml:22: assertions[0].source: MC-SH-01 is split into MC-SH-01.1, MC-SH-01.2"},
		{"untestable in a source", "", map[string]string{correct: scenarioWith(t, correct, "source: INV-PL-01\n", "source: DEC-PL-01\n")},
			"DEC-PL-01 is untestable (decision)"},
		{"naive without expect", "", map[string]string{naive: scenarioWith(t, naive, "expect:\n  fail: [p99]\n", "")},
			"scenarios/pool-naive.yaml: expect.fail: a naive twin must name the assertions it must fail on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = map[string]string{}
			}
			dir := writeRepo(t, tc.ledger, files)
			_, err := Generate(dir, data, specs)
			if err == nil {
				t.Fatalf("Generate: no error, want %q", tc.want)
			}
			if _, ok := err.(Problems); !ok {
				t.Fatalf("error is %T, want Problems: %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate:\n%v\nwant a problem containing %q", err, tc.want)
			}
		})
	}
}

// TestRenderTwinOnlyOnDeclaredAssertion: a naive twin counts for a claim
// only through an assertion its expect.fail names.
func TestRenderTwinOnlyOnDeclaredAssertion(t *testing.T) {
	dir := writeRepo(t, "", map[string]string{"scenarios/pool-naive.yaml": scenarioWith(t, "scenarios/pool-naive.yaml", "fail: [p99]", "fail: [errors]")})
	got, err := Generate(dir, data, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| MC-SH-01.1 | \"A full pool answers 503 within 5 ms.\" | [pool](../scenarios/pool.yaml): `errors` (gated at p90) | [pool-naive](../scenarios/pool-naive.yaml): `errors` |",
		"| INV-PL-01 | \"Reads stay below 100 ms at p99.\" | [pool](../scenarios/pool.yaml): `p99`, `errors` | [pool-naive](../scenarios/pool-naive.yaml): `errors` |",
		"**2 of 3 testable claims drilled**; 2 of them with a naive twin",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the ledger has no line containing\n%s\n---\n%s", want, got)
		}
	}
}
