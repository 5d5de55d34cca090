package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/measure"
)

// Marshal returns r as indented run.json bytes, redacted (see [Redact]),
// with SchemaVersion set.
func Marshal(r *Run) ([]byte, error) {
	c := Redact(r)
	if c.SchemaVersion == "" {
		c.SchemaVersion = SchemaVersion
	}
	if c.Scenario != nil && c.ScenarioFile == "" {
		c.ScenarioFile = c.Scenario.File
	}
	if c.Scenario != nil && c.ScenarioDigest == "" {
		d, err := ScenarioDigest(c.Scenario)
		if err != nil {
			return nil, err
		}
		c.ScenarioDigest = d
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
	}
	return buf.Bytes(), nil
}

// Save writes r to path as run.json (redacted; see [Redact]), creating
// the directory if needed. The file is written to a temporary name and
// renamed, so a reader never sees half a record.
func (r *Run) Save(path string) error {
	b, err := Marshal(r)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create report directory %s: %w", dir, err)
	}
	return WriteFile(path, "run record", b)
}

// WriteFile writes b to path (mode 0644) through a temporary file in the
// same directory and a rename, so a reader never sees half of it and a
// failed write leaves no file behind. Errors read "write <what> <path>:
// ...". Run records, their history summaries and metrics files are
// written this way.
func WriteFile(path, what string, b []byte) error {
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	// filepath.Dir, not "": CreateTemp would take "" for the system's
	// temporary directory, and the rename could then cross filesystems.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+strings.TrimSuffix(base, ext)+"-*"+ext)
	if err != nil {
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	return nil
}

// Load reads a run record written by [Run.Save]. It returns an error when
// the file cannot be read, is not JSON, is not a drill run record, or has
// a schema version other than [SchemaVersion]. Events come back sorted by
// At; Series is never nil.
func Load(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read run record: %w", err)
	}
	r, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("load run record %s: %w", path, err)
	}
	return r, nil
}

// Unmarshal decodes run.json bytes, checking the schema version first.
func Unmarshal(b []byte) (*Run, error) {
	var head struct {
		SchemaVersion *string `json:"schemaVersion"`
	}
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("not a JSON run record: not a JSON object")
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("not a JSON run record: %w", err)
	}
	if head.SchemaVersion == nil {
		return nil, fmt.Errorf("not a drill run record: no schemaVersion")
	}
	if *head.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("run record schema %q is not supported by this drill (it reads %q)", *head.SchemaVersion, SchemaVersion)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode run record: %w", err)
	}
	// Without its plan a record has no windows to judge: every reader
	// (report, compare, history, export) must refuse it rather than read
	// an empty judgement as "no regression" or "exit 0".
	if r.Plan == nil {
		return nil, errors.New("damaged run record: it has no plan (the timeline its windows are judged over)")
	}
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].At < r.Events[j].At })
	if r.Series == nil {
		r.Series = map[string]*measure.Series{}
	}
	if r.Scenario != nil && r.Scenario.File == "" {
		r.Scenario.File = r.ScenarioFile
	}
	return &r, nil
}

// ErrUnfinished means a report directory holds a run's per-second journal
// ([JournalFile]) but no run.json: the run was killed before it wrote its
// reports. `drill report DIR` writes them (an ABORTED report).
var ErrUnfinished = errors.New("run never finished writing its reports")

// LoadPath reads the run record at path: a run.json file, or a report
// directory holding one. A directory with only a per-second journal is
// refused with [ErrUnfinished] and the command that writes its reports;
// other errors are those of [Load] and of reading path.
func LoadPath(path string) (string, *Run, error) {
	if _, err := os.Stat(path); err != nil {
		return path, nil, fmt.Errorf("read run %s: %w", path, err)
	}
	dir, file := locate(path)
	run, err := Load(file)
	if errors.Is(err, fs.ErrNotExist) {
		if _, jerr := os.Stat(filepath.Join(dir, JournalFile)); jerr == nil {
			return file, nil, fmt.Errorf("read run %s: %w (it holds only %s); write them first with: drill report %s", dir, ErrUnfinished, JournalFile, dir)
		}
	}
	if err != nil {
		return file, nil, err
	}
	return file, run, nil
}
