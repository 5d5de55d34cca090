package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// Redacted replaces secret values in everything a run writes.
const Redacted = redact.Redacted

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

// RedactText applies the default redaction rules (internal/redact) to
// free text: sensitive header values, URL passwords, sensitive query and
// key=value values become [Redacted].
func RedactText(s string) string {
	return (*redact.Redactor)(nil).Text(s)
}

// Redactor returns the redaction rules of r: the defaults, the names its
// scenario adds (scenario.Redact) and the secret values known to the run
// ([Run.Secrets] and those written in its scenario).
func (r *Run) Redactor() *redact.Redactor {
	return r.Scenario.Redactor(r.Secrets...)
}

// Redact returns a copy of r, sharing nothing that it changes with r, as
// drill may write it (internal/redact's rules): the scenario through
// scenario.Scenario.Redacted (sensitive headers, URL passwords and query
// values, env values, bodies, basicAuth), and the plan's action details,
// event details, reasons and log lines, assertion messages and evidence,
// validity, cleanup and error texts, and the environment's Toxiproxy URL
// through its text rules. What judging reads (plan windows, events'
// kinds and times, series, assertions) is unchanged, so `drill report`
// re-judges a redacted record as it would the original. r is not
// modified.
func Redact(r *Run) *Run {
	rd := r.Redactor()
	c := *r
	c.Secrets = nil
	c.Scenario = r.Scenario.Redacted(rd)
	if r.Plan != nil {
		p := *r.Plan
		p.Actions = make([]plan.Action, len(r.Plan.Actions))
		for i, a := range r.Plan.Actions {
			a.Detail = rd.Text(a.Detail)
			p.Actions[i] = a
		}
		if r.Plan.Actions == nil {
			p.Actions = nil
		}
		c.Plan = &p
	}
	if r.Events != nil {
		c.Events = make([]event.Event, len(r.Events))
		for i, e := range r.Events {
			e.Detail = rd.Text(e.Detail)
			e.Reason = rd.Text(e.Reason)
			e.Logs = redactLines(rd, e.Logs)
			c.Events[i] = e
		}
	}
	if r.Results != nil {
		c.Results = make([]assert.Result, len(r.Results))
		for i, res := range r.Results {
			res.Message = rd.Text(res.Message)
			if res.Evidence != nil {
				ev := make([]assert.Evidence, len(res.Evidence))
				for j, e := range res.Evidence {
					e.Detail = rd.Text(e.Detail)
					e.Logs = redactLines(rd, e.Logs)
					ev[j] = e
				}
				res.Evidence = ev
			}
			c.Results[i] = res
		}
	}
	c.Validity.Problems = redactLines(rd, r.Validity.Problems)
	c.Validity.Warnings = redactLines(rd, r.Validity.Warnings)
	c.Cleanup.Command = rd.Text(r.Cleanup.Command)
	if r.Cleanup.Leftovers != nil {
		c.Cleanup.Leftovers = make([]Leftover, len(r.Cleanup.Leftovers))
		for i, l := range r.Cleanup.Leftovers {
			l.Name, l.Detail, l.Remove = rd.Text(l.Name), rd.Text(l.Detail), rd.Text(l.Remove)
			c.Cleanup.Leftovers[i] = l
		}
	}
	c.Aborted = rd.Text(r.Aborted)
	c.Error = rd.Text(r.Error)
	c.Environment.ToxiproxyURL = rd.Text(r.Environment.ToxiproxyURL)
	if r.Environment.Notes != nil {
		c.Environment.Notes = make(map[string]string, len(r.Environment.Notes))
		for k, v := range r.Environment.Notes {
			c.Environment.Notes[k] = rd.Text(v)
		}
	}
	return &c
}

func redactLines(rd *redact.Redactor, lines []string) []string {
	if lines == nil {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = rd.Text(l)
	}
	return out
}

// DefaultMaxConnectionErrors is a stream's default maxConnectionErrors:
// more than half of its requests failing at connection level makes the run
// invalid.
const DefaultMaxConnectionErrors = 0.5

// CheckConnectionErrors returns the streams of series whose share of
// connection-level errors (measure.ConnectionLevel) over [from, to) (clock
// offsets, usually the run window) is above the stream's
// maxConnectionErrors (default DefaultMaxConnectionErrors), sorted by
// name. sc may be nil (defaults for every stream).
func CheckConnectionErrors(sc *scenario.Scenario, series map[string]*measure.Series, from, to time.Duration) []StreamConnErrors {
	bounds := map[string]float64{}
	if sc != nil {
		for _, st := range sc.Streams {
			if st.MaxConnectionErrors != nil {
				bounds[st.Name] = *st.MaxConnectionErrors
			}
		}
	}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []StreamConnErrors
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		b := s.Window(from, to)
		if b.Requests == 0 {
			continue
		}
		bound, ok := bounds[n]
		if !ok {
			bound = DefaultMaxConnectionErrors
		}
		errs := b.ConnectionErrors()
		frac := float64(errs) / float64(b.Requests)
		if frac <= bound {
			continue
		}
		by := map[string]int64{}
		for k, c := range b.Errors {
			if measure.ConnectionLevel(k) && c > 0 {
				by[k] = c
			}
		}
		out = append(out, StreamConnErrors{Stream: n, Errors: errs, Requests: b.Requests, ByKind: by, Fraction: frac, Bound: bound})
	}
	return out
}

// CheckLag judges each stream's recorded seconds over [from, to) by
// measure's lag rule ([measure.LagBudget]: requests sent later than the
// stream's lagBudget.late, plus those intended and never sent, over those
// due, against lagBudget.fraction; the defaults are measure's) and returns
// the streams beyond budget, sorted by name. The load engine counted a
// request late (Bucket.Late) by the stream's own budget.
func CheckLag(sc *scenario.Scenario, series map[string]*measure.Series, from, to time.Duration) []StreamLag {
	var out []StreamLag
	budgets := map[string]measure.LagBudget{}
	if sc != nil {
		for _, st := range sc.Streams {
			if lb := st.LagBudget; lb != nil {
				budgets[st.Name] = measure.LagBudget{LateAfter: lb.Late.D(), Fraction: lb.Fraction}
			}
		}
	}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		b := s.Window(from, to)
		c := b.LagCount()
		if c.Due() == 0 {
			continue
		}
		lb := budgets[n].OrDefault()
		if !lb.Exceeded(c) {
			continue
		}
		l := StreamLag{Stream: n, Late: b.Late, Requests: b.Requests, Missed: c.Missed(),
			Fraction: c.Fraction(), Budget: lb.Fraction, LateAfter: lb.LateAfter,
			LagP99: measure.Quantile(b.Lag, 99)}
		if l.Missed > 0 {
			l.Intended = c.Intended
		}
		for _, bk := range s.Buckets {
			if bk.Within(from, to) && bk.Late > l.WorstLate {
				l.WorstAt, l.WorstLate = bk.Start, bk.Late
			}
		}
		out = append(out, l)
	}
	return out
}

// CheckGenerator returns a problem (for Validity.Problems) per stream
// whose generator could not send some of its requests over [from, to)
// because drill ran out of file descriptors (measure.ErrGeneratorFiles),
// sorted by stream; limit is the process's open-file limit (0: unknown).
// Those requests never reached the target, so no verdict on the target
// can rest on them.
func CheckGenerator(series map[string]*measure.Series, from, to time.Duration, limit uint64) []string {
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	lim := ""
	if limit > 0 {
		lim = fmt.Sprintf(" (open-file limit %d)", limit)
	}
	var out []string
	for _, n := range names {
		s := series[n]
		if s == nil {
			continue
		}
		var failed int64
		var first *measure.Bucket
		for _, b := range s.Buckets {
			if !b.Within(from, to) || b.GeneratorFailures() == 0 {
				continue
			}
			failed += b.GeneratorFailures()
			if first == nil {
				first = b
			}
		}
		if failed > 0 {
			out = append(out, fmt.Sprintf("stream %q: drill ran out of file descriptors%s and could not send %d requests, the first due in t=%s..%s: they never reached the target; raise the limit (ulimit -n 65536) or lower the stream's maxWorkers or timeout (each request in flight holds a connection)",
				n, lim, failed, first.Start, first.Start+first.Width))
		}
	}
	return out
}

// ScenarioDigest returns "sha256:" and the hex SHA-256 of the canonical
// form of s: its redacted JSON encoding (map keys sorted, secrets
// replaced, so a rotated token does not change it) without what only
// judges or describes a run: the metadata other than the name, the
// assertions, the claims and the compare section. Two runs with the same
// digest drove the same load against the same system with the same
// faults on the same timeline, so their figures compare; re-judging with
// other bounds (drill report --set) keeps the digest. It returns an error
// only when the scenario cannot be encoded.
func ScenarioDigest(s *scenario.Scenario) (string, error) {
	if s == nil {
		return "", fmt.Errorf("scenario digest: no scenario")
	}
	c := *s.Redacted(s.Redactor())
	c.Metadata = scenario.Metadata{Name: s.Metadata.Name}
	c.Assertions, c.Claims, c.Compare = nil, nil, nil
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("scenario digest of %s: %w", s.Metadata.Name, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
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
