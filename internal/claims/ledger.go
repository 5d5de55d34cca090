// Package claims builds drill's claims ledger, docs/CLAIMS.md: every
// testable claim of the source documents (../shared/specs/), with the
// shipped drills and assertions that check it and the naive twin that must
// fail on it. The claims and their quotes come from one data file
// (docs/claims/claims.yaml, [Load]); which assertion checks which claim
// comes from the scenarios alone (an assertion's source names the claim's
// id, [Build]), and the naive twin from the twin's expect.fail. [Render]
// writes the ledger, [CheckSpecs] ties the data file to the documents.
package claims

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Kind says what sort of claim a sentence makes.
type Kind string

// Claim kinds. Figures and behaviours are testable; the rest are not, and
// only they may carry an untestable line.
const (
	KindFigure    Kind = "figure"    // a number: a time, a count, a bound
	KindBehaviour Kind = "behaviour" // what the system does or must not do
	KindOwner     Kind = "owner"     // who owns a mechanism
	KindLinter    Kind = "linter"    // a rule a linter or repository check enforces
	KindProcess   Kind = "process"   // a step of a release or review process
	KindDecision  Kind = "decision"  // a decision, made or open
)

// kinds lists every kind in the order the error messages name them.
var kinds = []Kind{KindFigure, KindBehaviour, KindOwner, KindLinter, KindProcess, KindDecision}

// Testable reports whether a claim of kind k can be checked by a drill.
func (k Kind) Testable() bool { return k == KindFigure || k == KindBehaviour }

// Ledger is the data file: the source documents and their claims.
type Ledger struct {
	// Documents in the order the ledger lists them.
	Documents []Document `yaml:"documents"`
	// File is the path the ledger was read from (not in the YAML).
	File string `yaml:"-"`
}

// Document is one source document under the specs directory.
type Document struct {
	// ID is the id scenarios use for the whole document in
	// metadata.sources (HEALTH-ORD-001, ADR-0077).
	ID string `yaml:"id"`
	// File is the document's file name in the specs directory.
	File string `yaml:"file"`
	// Title names the document in the ledger.
	Title string `yaml:"title"`
	// Claims in the order the ledger lists them.
	Claims []Claim `yaml:"claims"`
}

// Claim is one claim of a document.
type Claim struct {
	// ID is the document's clause id (MC-PS-01), with .n when the clause
	// holds several claims (MC-PS-01.1); the document's id with .n for a
	// claim outside a clause; ADR0077-n or TUT-n for the documents
	// without ids.
	ID string `yaml:"id"`
	// Kind is figure, behaviour, owner, linter, process or decision.
	Kind Kind `yaml:"kind"`
	// Quote is the claim's sentence as the document writes it (the test
	// finds it in the document, whitespace aside).
	Quote string `yaml:"quote"`
	// Blocked says, for a testable claim no shipped drill checks, what
	// blocks it (one line).
	Blocked string `yaml:"blocked,omitempty"`
	// Untestable says, for an owner, linter, process or decision, why no
	// drill can test it (one line).
	Untestable string `yaml:"untestable,omitempty"`
	// Note qualifies how the drills check the claim (a looser bound, a
	// percentile), shown beside the checks.
	Note string `yaml:"note,omitempty"`
	// Line is the claim's line in the data file (not in the YAML).
	Line int `yaml:"-"`
}

// Problem is one thing wrong with the data file, the documents or the
// scenarios, located where it can be fixed.
type Problem struct {
	// File and Line locate the problem (Line 0: the file as a whole).
	File string
	Line int
	// Field is the key or id the problem is about.
	Field string
	// Msg says what is wrong.
	Msg string
}

func (p Problem) String() string {
	loc := p.File
	if p.Line > 0 {
		loc += fmt.Sprintf(":%d", p.Line)
	}
	if p.Field != "" {
		return loc + ": " + p.Field + ": " + p.Msg
	}
	return loc + ": " + p.Msg
}

// Problems is every problem found at once; it is the error [Load],
// [CheckSpecs] and [Build] return.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// orNil returns ps as an error, nil when empty.
func (ps Problems) orNil() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

var (
	// ClauseRE matches a clause or document id of the specs
	// (MC-PS-01, INV-HLT-03, HEALTH-ORD-001).
	ClauseRE = regexp.MustCompile(`\b[A-Z]{2,}-[A-Z]{2,}-[0-9]{2,}\b`)
	// claimIDRE matches a claim id: a clause id with an optional .n, or
	// ADR0077-n, TUT-n.
	claimIDRE = regexp.MustCompile(`^(?:[A-Z]{2,}-[A-Z]{2,}-[0-9]{2,}(?:\.[0-9]+)?|ADR0077-[0-9]+|TUT-[0-9]+)$`)
)

// Load reads the data file at path strictly (unknown keys are errors)
// and checks it: ids well formed and unique, a known kind, a quote, an
// untestable line exactly on the kinds that cannot be tested, no blocked
// line on them. Every problem comes back at once as [Problems], each with
// the file and line; a file that cannot be read or parsed is one problem.
func Load(path string) (*Ledger, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{File: path, Msg: fmt.Sprintf("read the claims data file: %v", err)}}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&root); err != nil {
		return nil, Problems{{File: path, Msg: fmt.Sprintf("parse: %v", err)}}
	}
	l := &Ledger{File: path}
	if err := root.Decode(l); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			ps := Problems{}
			for _, m := range te.Errors {
				ps = append(ps, Problem{File: path, Msg: m})
			}
			return nil, ps
		}
		return nil, Problems{{File: path, Msg: fmt.Sprintf("decode: %v", err)}}
	}
	setLines(&root, l)
	return l, l.check().orNil()
}

// setLines copies each claim's line from the YAML nodes.
func setLines(root *yaml.Node, l *Ledger) {
	docs := mapValue(root, "documents")
	if docs == nil {
		return
	}
	for i, dn := range docs.Content {
		if i >= len(l.Documents) {
			return
		}
		cs := mapValue(dn, "claims")
		if cs == nil {
			continue
		}
		for j, cn := range cs.Content {
			if j < len(l.Documents[i].Claims) {
				l.Documents[i].Claims[j].Line = cn.Line
			}
		}
	}
}

// mapValue returns the value node of key in the mapping n (or the
// document's root mapping), nil when absent.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// check is Load's rules over a decoded ledger.
func (l *Ledger) check() Problems {
	var ps Problems
	add := func(line int, field, format string, args ...any) {
		ps = append(ps, Problem{File: l.File, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if len(l.Documents) == 0 {
		add(0, "documents", "no documents")
	}
	seen := map[string]int{}
	docIDs := map[string]bool{}
	for _, d := range l.Documents {
		if d.ID == "" || d.File == "" {
			add(0, "documents", "a document needs an id and a file (id %q, file %q)", d.ID, d.File)
		}
		if docIDs[d.ID] {
			add(0, "documents", "document id %q twice", d.ID)
		}
		docIDs[d.ID] = true
		for _, c := range d.Claims {
			field := c.ID
			if field == "" {
				field = "id"
			}
			switch line, dup := seen[c.ID]; {
			case c.ID == "":
				add(c.Line, "id", "a claim needs an id")
			case !claimIDRE.MatchString(c.ID):
				add(c.Line, field, "not a claim id: use the document's clause id (MC-PS-01), with .n for one of several claims of a clause (MC-PS-01.1), %s.n outside a clause, or ADR0077-n, TUT-n", d.ID)
			case dup:
				add(c.Line, field, "claim id twice (also at line %d)", line)
			default:
				seen[c.ID] = c.Line
			}
			if strings.TrimSpace(c.Quote) == "" {
				add(c.Line, field, "no quote: quote the claim's sentence as the document writes it")
			}
			known := false
			for _, k := range kinds {
				known = known || c.Kind == k
			}
			switch {
			case !known:
				add(c.Line, field, "kind %q: want one of %s", c.Kind, kindList())
			case c.Kind.Testable() && c.Untestable != "":
				add(c.Line, field, "a claim of kind %s is testable: untestable is only for an owner, a linter, a process or a decision; say what blocks it (blocked:) instead", c.Kind)
			case !c.Kind.Testable() && c.Untestable == "":
				add(c.Line, field, "a claim of kind %s needs an untestable line saying why no drill can test it", c.Kind)
			case !c.Kind.Testable() && (c.Blocked != "" || c.Note != ""):
				add(c.Line, field, "an untestable claim takes no blocked or note line")
			}
		}
	}
	// A bare clause id used as a claim id must not also be split into
	// .n claims.
	for id := range seen {
		if base, _, ok := strings.Cut(id, "."); ok {
			if line, bare := seen[base]; bare {
				add(line, base, "the clause is both a claim and split into %s.n claims: use one or the other", base)
			}
		}
	}
	return ps
}

func kindList() string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// claimByID indexes the ledger's claims.
func (l *Ledger) claimByID() map[string]*Claim {
	m := map[string]*Claim{}
	for i := range l.Documents {
		for j := range l.Documents[i].Claims {
			c := &l.Documents[i].Claims[j]
			m[c.ID] = c
		}
	}
	return m
}

// split returns the claim ids a clause is split into (MC-PS-01 ->
// MC-PS-01.1, MC-PS-01.2, ...), in ledger order; nil when it is not.
func (l *Ledger) split(clause string) []string {
	var out []string
	for _, d := range l.Documents {
		for _, c := range d.Claims {
			if strings.HasPrefix(c.ID, clause+".") {
				out = append(out, c.ID)
			}
		}
	}
	return out
}

// hasDocument reports whether id is a document's id.
func (l *Ledger) hasDocument(id string) bool {
	for _, d := range l.Documents {
		if d.ID == id {
			return true
		}
	}
	return false
}
