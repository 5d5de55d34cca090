package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/drillhq/drill/internal/scenario"
)

// Open reads the record a report is made from. path is a run.json, or a
// run's report directory (its run.json). When that run.json does not exist
// but the run's journal ([JournalFile]) does, the run was killed before it
// wrote run.json: the record is rebuilt from the journal ([Recover];
// aborted, exit 3). Errors: neither can be read.
func Open(path string) (*Run, error) {
	dir, file := locate(path)
	run, err := Load(file)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return run, err
	}
	rec, rerr := Recover(dir)
	if rerr != nil {
		if errors.Is(rerr, ErrNoJournal) {
			return nil, fmt.Errorf("%w (and no run journal %s beside it)", err, JournalFile)
		}
		return nil, rerr
	}
	return rec, nil
}

// locate returns the report directory and run.json of path: a directory
// holds its run.json; anything else is the run.json itself.
func locate(path string) (dir, file string) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return path, filepath.Join(path, "run.json")
	}
	return filepath.Dir(path), path
}

// Override changes the recorded scenario's assertions by sets, each
// "<assertion>.<field>=<value>" written as in a scenario file
// (scenario.OverrideAssertion), before the run is judged again
// ([Run.Rejudge]). It returns every set that does not apply, and every
// problem the changed scenario has that the recorded one did not (those
// it already had did not stop the run and are not the overrides' doing),
// joined; the assertions may then be partly changed.
func (r *Run) Override(sets []string) error {
	if len(sets) == 0 {
		return nil
	}
	if r.Scenario == nil {
		return errors.New("the run record has no scenario")
	}
	had := map[string]bool{}
	for _, e := range validationErrors(r.Scenario) {
		had[e] = true
	}
	var errs []error
	for _, s := range sets {
		if err := scenario.OverrideAssertion(r.Scenario.Assertions, s); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		for _, e := range validationErrors(r.Scenario) {
			if !had[e] {
				errs = append(errs, fmt.Errorf("--set: %s", e))
			}
		}
	}
	return errors.Join(errs...)
}

// validationErrors returns s's semantic problems, one message each,
// without its file name (a recorded scenario has no positions).
func validationErrors(s *scenario.Scenario) []string {
	var out []string
	if e := scenario.AsErrors(s.Validate()); e != nil {
		for _, x := range e.List {
			c := *x
			c.File = ""
			out = append(out, c.Error())
		}
	}
	return out
}

// CheckOutDir refuses a report directory that holds another run's record
// (its run.json names a run id other than runID): writing a run's reports
// there would replace that run's and lose it. A directory of this run, an
// empty one or a new one is fine. Errors name the directory and the other
// run.
func CheckOutDir(out, runID string) error {
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		return nil // nothing recorded there (or unreadable: writing says so)
	}
	var head struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal(b, &head) != nil || head.RunID == "" || head.RunID == runID {
		return nil
	}
	return fmt.Errorf("--out %s: it holds the reports of run %s, not of run %s; pick another --out", out, head.RunID, runID)
}
