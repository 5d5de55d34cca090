package record_test

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/record/recordtest"
	"github.com/drillhq/drill/internal/scenario"
)

// TestScenarioDigest: Save writes a digest that survives Load and a
// second Save, ignores what only judges a run (assertion bounds, claims,
// the compare section, the description) and changes with what the drill
// does (a stream's rate, a fault's length).
func TestScenarioDigest(t *testing.T) {
	t.Parallel()
	base := recordtest.Scenario(recordtest.Options{Scale: 10})
	want, err := record.ScenarioDigest(base)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(want) {
		t.Fatalf("digest %q is not sha256:<64 hex>", want)
	}

	run := recordtest.Run(recordtest.Options{Scale: 10})
	path := filepath.Join(t.TempDir(), "run.json")
	if err := run.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := record.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.ScenarioDigest != want {
		t.Fatalf("saved digest %q, want %q", got.ScenarioDigest, want)
	}
	got.Scenario.Timeline.Duration.Duration = time.Hour // a stale digest is kept, not recomputed
	if err := got.Save(path); err != nil {
		t.Fatal(err)
	}
	if again, _ := record.Load(path); again.ScenarioDigest != want {
		t.Fatalf("digest after a second save %q, want %q", again.ScenarioDigest, want)
	}

	for _, tc := range []struct {
		name   string
		change func(s *scenario.Scenario)
		same   bool
	}{
		{"assertion bound", func(s *scenario.Scenario) { s.Assertions[0].MaxLatency.Duration = time.Millisecond }, true},
		{"claims and description", func(s *scenario.Scenario) {
			s.Metadata.Description = "other words"
			s.Claims = []scenario.Claim{{Fault: "tax-brownout"}}
		}, true},
		{"compare section", func(s *scenario.Scenario) { v := 0.5; s.Compare = &scenario.Compare{P99Increase: &v} }, true},
		{"stream rate", func(s *scenario.Scenario) { s.Streams[0].Rate.Freq++ }, false},
		{"fault length", func(s *scenario.Scenario) { s.Faults[0].For.Duration += time.Second }, false},
		{"scenario name", func(s *scenario.Scenario) { s.Metadata.Name = "other" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := recordtest.Scenario(recordtest.Options{Scale: 10})
			tc.change(s)
			d, err := record.ScenarioDigest(s)
			if err != nil {
				t.Fatal(err)
			}
			if (d == want) != tc.same {
				t.Fatalf("digest changed=%v, want changed=%v", d != want, !tc.same)
			}
		})
	}
}
