package findings_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/record"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenRecordedRuns computes the findings of run.json files recorded
// by real runs before findings existed, and compares their text with
// golden files: testdata/<name>.run.json -> testdata/<name>.findings.golden.
func TestGoldenRecordedRuns(t *testing.T) {
	runs, err := filepath.Glob("testdata/*.run.json")
	if err != nil || len(runs) == 0 {
		t.Fatalf("no recorded runs under testdata: %v", err)
	}
	for _, path := range runs {
		name := strings.TrimSuffix(filepath.Base(path), ".run.json")
		t.Run(name, func(t *testing.T) {
			run, err := record.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			got := findings.Compute(findings.Input{Plan: run.Plan, Scenario: run.Scenario, Events: run.Events, Series: run.Series})
			var b strings.Builder
			for _, f := range got {
				b.WriteString(string(f.Severity) + "\t" + string(f.Kind) + "\t" + f.Text + "\n")
			}
			golden := filepath.Join("testdata", name+".findings.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("findings of %s differ from %s:\n--- got\n%s--- want\n%s", path, golden, b.String(), want)
			}
		})
	}
}
