package claims

import (
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/scenario"
)

// ScenarioGlobs are the shipped drills, relative to the repository root.
var ScenarioGlobs = []string{"scenarios/*.yaml", "scenarios/compose/*.yaml", "scenarios/k8s/*.yaml"}

// Drill is one shipped scenario.
type Drill struct {
	// Path is the scenario's path from the repository root, with slashes
	// (scenarios/k8s/orders-db-brownout.yaml).
	Path string
	// Scenario is the loaded scenario.
	Scenario *scenario.Scenario
}

// Name is the drill's path under scenarios/ without .yaml
// (k8s/orders-db-brownout).
func (d Drill) Name() string {
	return strings.TrimSuffix(strings.TrimPrefix(d.Path, "scenarios/"), ".yaml")
}

// Naive reports whether the drill is a naive twin: its expect.fail names
// the assertions it must fail on.
func (d Drill) Naive() bool {
	return d.Scenario.Expect != nil && len(d.Scenario.Expect.Fail) > 0
}

// LoadDrills loads every shipped scenario under root (ScenarioGlobs), in
// path order. The error names each scenario that does not load.
func LoadDrills(root string) ([]Drill, error) {
	var paths []string
	for _, g := range ScenarioGlobs {
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(g)))
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", g, err)
		}
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	var drills []Drill
	var ps Problems
	for _, p := range paths {
		s, err := scenario.Load(p)
		if err != nil {
			ps = append(ps, Problem{File: p, Msg: err.Error()})
			continue
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", p, err)
		}
		drills = append(drills, Drill{Path: filepath.ToSlash(rel), Scenario: s})
	}
	return drills, ps.orNil()
}

// Check is one assertion of a shipped drill whose source names a claim.
type Check struct {
	// Drill is the correct build's scenario.
	Drill Drill
	// Assertion is the assertion's name.
	Assertion string
}

// Twin is a naive twin's declaration that it must fail on an assertion
// that checks a claim.
type Twin struct {
	// Drill is the naive twin.
	Drill Drill
	// Assertion is the assertion in its expect.fail.
	Assertion string
}

// Reported is a scenario claim (a finding: a claimed time reported beside
// the measured one, never gated) whose source names a claim.
type Reported struct {
	Drill Drill
	// Claim is the scenario claim's name.
	Claim string
}

// Status is where a claim stands.
type Status string

// Statuses, in the order of the summary.
const (
	Drilled    Status = "drilled"     // checked by an assertion of a shipped correct drill
	ReportOnly Status = "reported"    // only reported beside a measured time
	NotDrilled Status = "not drilled" // testable, not checked yet
	Untestable Status = "untestable"  // an owner, a linter, a process or a decision
)

// Row is one claim of the ledger with what checks it.
type Row struct {
	Claim    Claim
	Status   Status
	Checks   []Check
	Twins    []Twin
	Reported []Reported
}

// Section is one document's rows.
type Section struct {
	Document Document
	Rows     []Row
}

// Report is the whole ledger, ready to render.
type Report struct {
	Sections []Section
}

// Count returns the testable claims, how many are drilled, how many of
// those a naive twin must fail on, how many are only reported, and how
// many claims are untestable.
func (r *Report) Count() (testable, drilled, twinned, reported, untestable int) {
	for _, s := range r.Sections {
		t, d, w, rp, u := s.count()
		testable, drilled, twinned, reported, untestable = testable+t, drilled+d, twinned+w, reported+rp, untestable+u
	}
	return
}

func (s Section) count() (testable, drilled, twinned, reported, untestable int) {
	for _, row := range s.Rows {
		switch row.Status {
		case Untestable:
			untestable++
			continue
		case Drilled:
			drilled++
			if len(row.Twins) > 0 {
				twinned++
			}
		case ReportOnly:
			reported++
		}
		testable++
	}
	return
}

// Build derives the ledger from the data file and the shipped drills.
// A claim is checked by every assertion of a correct drill (one without
// expect.fail) whose source names the claim's id; a naive twin (the drill
// NAME-naive beside NAME) must fail on it when its expect.fail names that
// assertion; a scenario claim (a reported finding) whose source names the
// id reports it. Problems: a source naming an id the ledger does not
// have, a bare clause id the ledger splits into .n claims (name the
// claims), an untestable claim named by an assertion, a naive twin
// without expect.fail or without its correct drill, a drilled claim that
// still says what blocks it, a testable claim no drill checks that does
// not.
func Build(l *Ledger, drills []Drill) (*Report, error) {
	var ps Problems
	ids := l.claimByID()
	checks := map[string][]Check{}
	twins := map[string][]Twin{}
	reported := map[string][]Reported{}
	byPath := map[string]Drill{}
	for _, d := range drills {
		byPath[d.Path] = d
	}
	for _, d := range drills {
		s := d.Scenario
		at := func(field string) int {
			if p, ok := s.Positions[field]; ok {
				return p.Line
			}
			return 0
		}
		resolve := func(field, text string, bareOK bool) []string {
			var out []string
			for _, tok := range scenario.ClaimIDs(text) {
				switch c, parts := ids[tok], l.split(tok); {
				case c != nil && !c.Kind.Testable() && !bareOK:
					ps = append(ps, Problem{File: d.Path, Line: at(field), Field: field, Msg: fmt.Sprintf("%s is untestable (%s) in %s; an assertion cannot check it", tok, c.Kind, l.File)})
				case c != nil:
					out = append(out, tok)
				case len(parts) > 0 && bareOK, l.hasDocument(tok) && bareOK:
				case len(parts) > 0:
					ps = append(ps, Problem{File: d.Path, Line: at(field), Field: field, Msg: fmt.Sprintf("%s is split into %s in %s: name the claims this checks", tok, strings.Join(parts, ", "), l.File)})
				default:
					ps = append(ps, Problem{File: d.Path, Line: at(field), Field: field, Msg: fmt.Sprintf("%s is no claim of %s", tok, l.File)})
				}
			}
			return out
		}
		for i, src := range s.Metadata.Sources {
			resolve(fmt.Sprintf("metadata.sources[%d]", i), src, true)
		}
		naive := d.Naive()
		for i, a := range s.Assertions {
			for _, id := range resolve(fmt.Sprintf("assertions[%d].source", i), a.Source, false) {
				if naive {
					continue
				}
				checks[id] = append(checks[id], Check{Drill: d, Assertion: a.Name})
				if tw, ok := byPath[twinPath(d.Path)]; ok && tw.Scenario.ExpectedFail(a.Name) {
					twins[id] = append(twins[id], Twin{Drill: tw, Assertion: a.Name})
				}
			}
		}
		for i, c := range s.Claims {
			for _, id := range resolve(fmt.Sprintf("claims[%d].source", i), c.Source, false) {
				if !naive {
					reported[id] = append(reported[id], Reported{Drill: d, Claim: c.Name})
				}
			}
		}
		if strings.HasSuffix(d.Name(), "-naive") {
			if !naive {
				ps = append(ps, Problem{File: d.Path, Field: "expect.fail", Msg: "a naive twin must name the assertions it must fail on (expect: {fail: [...]})"})
			}
			if _, ok := byPath[strings.TrimSuffix(d.Path, "-naive.yaml")+".yaml"]; !ok {
				ps = append(ps, Problem{File: d.Path, Msg: "a naive twin without its correct drill beside it"})
			}
		}
	}
	r := &Report{}
	for _, doc := range l.Documents {
		sec := Section{Document: doc}
		for _, c := range doc.Claims {
			row := Row{Claim: c, Checks: checks[c.ID], Twins: twins[c.ID], Reported: reported[c.ID]}
			switch {
			case !c.Kind.Testable():
				row.Status = Untestable
			case len(row.Checks) > 0:
				row.Status = Drilled
				if c.Blocked != "" {
					ps = append(ps, Problem{File: l.File, Line: c.Line, Field: c.ID, Msg: fmt.Sprintf("checked by %s of %s: drop the blocked line", row.Checks[0].Assertion, row.Checks[0].Drill.Path)})
				}
			case c.Blocked == "":
				ps = append(ps, Problem{File: l.File, Line: c.Line, Field: c.ID, Msg: "no shipped drill checks this claim: say what blocks it (blocked:)"})
				row.Status = NotDrilled
			case len(row.Reported) > 0:
				row.Status = ReportOnly
			default:
				row.Status = NotDrilled
			}
			if c.Note != "" && row.Status != Drilled {
				ps = append(ps, Problem{File: l.File, Line: c.Line, Field: c.ID, Msg: "a note qualifies the checks of a drilled claim; this one has none"})
			}
			sec.Rows = append(sec.Rows, row)
		}
		r.Sections = append(r.Sections, sec)
	}
	return r, ps.orNil()
}

// twinPath is the path of the naive twin of the drill at p.
func twinPath(p string) string {
	dir, file := path.Split(p)
	return dir + strings.TrimSuffix(file, ".yaml") + "-naive.yaml"
}
