package scenario_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// FuzzParse feeds arbitrary bytes through Parse, SetDefaults, Validate and
// the planner: none may panic, bad input must come back as *scenario.Errors
// with located messages, and a scenario that validates must plan.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"../../testdata/scenarios/*/*.yaml", "../../scenarios/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scenario.Parse("fuzz.yaml", data)
		if err != nil {
			checkErrors(t, err)
			return
		}
		s.SetDefaults()
		if err := s.Validate(); err != nil {
			checkErrors(t, err)
			return
		}
		p, err := plan.Build(s)
		if err != nil {
			t.Fatalf("a valid scenario does not plan: %v", err)
		}
		if err := plan.Print(io.Discard, p); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	})
}

func checkErrors(t *testing.T, err error) {
	t.Helper()
	var errs *scenario.Errors
	if !errors.As(err, &errs) || len(errs.List) == 0 {
		t.Fatalf("error is not a non-empty *scenario.Errors: %T %v", err, err)
	}
	for _, e := range errs.List {
		if e.File == "" || e.Msg == "" {
			t.Fatalf("unlocated or empty error: %+v", e)
		}
	}
}
