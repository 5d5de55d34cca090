package scenario

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/drillhq/drill/internal/composefile"
)

// envNameRE matches a portable environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var (
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	nameRE     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$`)
	metricRE   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	tokenRE    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Validate checks a scenario after [Scenario.SetDefaults] and returns every
// problem at once as *[Errors] (nil when it is valid). It checks that
// references resolve (proxies, dependencies, streams, services, windows,
// ${...}), that faults and windows lie inside the run and user windows do
// not overlap, that rates, ratios and percentiles are in range, that each
// fault and assertion carries only the keys of its type, and that probes
// obey Kubernetes' rules (liveness and startup successThreshold must be 1).
// Errors name the file, line and column from [Scenario.Positions].
func (s *Scenario) Validate() error {
	v := &validator{s: s, refs: s.refTable(), vars: s.SampleVars()}
	var secrets []string
	for _, val := range s.EnvVars(os.LookupEnv) {
		secrets = append(secrets, val)
	}
	v.errs.rd = s.Redactor(secrets...)
	v.metadata()
	v.environment()
	v.timeline()
	v.dependencies()
	v.toxiproxy()
	v.proxies()
	v.services()
	v.streams()
	v.load()
	v.faults()
	v.observers()
	v.stopConditions()
	v.assertions()
	v.claims()
	v.expect()
	v.compare()
	v.redaction()
	v.references()
	return v.errs.err(s.File)
}

type validator struct {
	s    *Scenario
	errs errorList
	refs map[string]map[string][]string
	vars map[string]string
	// compose is the Compose file of a compose environment, once
	// composeEnv read it (nil before, or when it did not load).
	compose *composefile.Project
}

// errorf records a problem at path, located at the nearest position known
// for path or one of its parents.
func (v *validator) errorf(path, format string, args ...any) {
	e := &Error{File: v.s.File, Path: path, Msg: fmt.Sprintf(format, args...)}
	if p, ok := v.s.position(path); ok {
		e.Line, e.Column = p.Line, p.Column
		if p.File != "" {
			e.File = p.File
		}
	}
	v.errs.add(e)
}

// position finds the position of path or its nearest parent.
func (s *Scenario) position(path string) (Position, bool) {
	for path != "" {
		if p, ok := s.Positions[path]; ok {
			return p, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return Position{}, false
}

// Position returns where the value at path (e.g. "faults[0].latency") was
// written, or the nearest parent's position; ok is false when unknown.
func (s *Scenario) Position(path string) (pos Position, ok bool) { return s.position(path) }

func oneOf(got string, known []string) bool {
	for _, k := range known {
		if k == got {
			return true
		}
	}
	return false
}

// unknownValue formats an unknown-enum message with the sorted known list.
func unknownValue(what, got string, known []string) string {
	k := append([]string(nil), known...)
	sort.Strings(k)
	return fmt.Sprintf("unknown %s %q; known: %s", what, got, strings.Join(k, ", "))
}

// unique reports duplicate names and names that break references.
func (v *validator) unique(kind string, names []string, paths func(i int) string) map[string]int {
	seen := map[string]int{}
	for i, n := range names {
		p := paths(i) + ".name"
		switch {
		case n == "":
			v.errorf(p, "name is required")
			continue
		case !nameRE.MatchString(n):
			v.errorf(p, "invalid %s name %q: use letters, digits, '-' and '_' (at most 63, starting and ending with a letter or digit)", kind, n)
		}
		if j, dup := seen[n]; dup {
			v.errorf(p, "duplicate %s name %q (also %s)", kind, n, paths(j))
			continue
		}
		seen[n] = i
	}
	return seen
}

// article returns "an" or "a" for word.
func article(word string) string {
	// "u" is "an" before a vowel sound (unroutable) and "a" before a "you"
	// sound (url): drill's kinds starting with u are of the first kind.
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func knownNames(names []string) string {
	if len(names) == 0 {
		return "; none are defined"
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return "; known: " + strings.Join(sorted, ", ")
}

// references checks every ${...} in every string value of the scenario.
func (v *validator) references() {
	walkStrings(reflect.ValueOf(v.s).Elem(), "", func(path, s string) {
		if !strings.Contains(s, "$") {
			return
		}
		refs, err := Refs(s)
		if err != nil {
			v.errorf(path, "%s", err.Error())
			return
		}
		for _, r := range refs {
			if msg := v.s.checkRef(r.Key, v.refs); msg != "" {
				v.errorf(path, "%s", msg)
			}
		}
	})
}

// expandSample expands s with sample values; ok is false when s has a bad
// reference (reported by references()).
func (v *validator) expandSample(s string) (string, bool) {
	out, err := Expand(s, v.vars)
	return out, err == nil
}

// checkURL checks an absolute http(s) URL (after sample expansion).
func (v *validator) checkURL(p, raw string) {
	if raw == "" {
		v.errorf(p, "url is required")
		return
	}
	s, ok := v.expandSample(raw)
	if !ok {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf(p, "url %q must be an absolute http:// or https:// URL", raw)
	}
}

// checkHostPort checks host:port (after sample expansion).
func (v *validator) checkHostPort(p, raw string) {
	s, ok := v.expandSample(raw)
	if !ok {
		return
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		v.errorf(p, "address %q must be host:port (e.g. 127.0.0.1:0)", raw)
	}
}
