package scenario

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
)

// A reference is written ${<kind>.<name>.<attribute>} (or ${run.id}) inside
// a string value; "$$" writes a literal "$". The runner fills the values
// when the things they name have started:
//
//	${dependencies.<name>.addr|host|port}  every dependency (host:port on loopback)
//	${dependencies.<name>.dsn}             postgres: postgres://user@host:port/db?sslmode=disable
//	${dependencies.<name>.url}             httpStub: http://host:port
//	${proxies.<name>.addr|host|port}       the proxy's resolved listen address
//	${services.<name>.url|addr}            the local service proxy (or Service.URL on kubernetes)
//	${run.id}                              the run's id
//	${env.<NAME>}                          drill's own environment variable NAME
//
// ${env.NAME} takes a value (a secret, typically) from drill's environment
// so that the scenario need not hold it: a variable that is not set is a
// validation error, and the value is redacted wherever it would appear in
// what drill writes (the scenario is recorded with the reference, not the
// value).

// Ref is one ${...} reference found in a string.
type Ref struct {
	// Key is the text between "${" and "}", e.g. "proxies.postgres.addr".
	Key string
	// Offset is the byte offset of "$" in the string.
	Offset int
}

// Refs returns the references in s, in order. It fails on an unterminated
// "${" or an empty "${}".
func Refs(s string) ([]Ref, error) {
	var refs []Ref
	err := scan(s, func(r Ref) (string, error) { refs = append(refs, r); return "", nil }, nil)
	return refs, err
}

// Expand replaces each ${key} in s by vars[key] and "$$" by "$". A key that
// vars lacks is an error naming it; the runner builds vars from what it
// started (see the list above).
func Expand(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	err := scan(s, func(r Ref) (string, error) {
		v, ok := vars[r.Key]
		if !ok {
			return "", fmt.Errorf("expand %q: no value for ${%s}", s, r.Key)
		}
		return v, nil
	}, &b)
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// scan walks s, calling fn for each reference and writing the expansion to
// out when out is not nil.
func scan(s string, fn func(Ref) (string, error), out *strings.Builder) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) || (s[i+1] != '{' && s[i+1] != '$') {
			if out != nil {
				out.WriteByte(c)
			}
			i++
			continue
		}
		if s[i+1] == '$' {
			if out != nil {
				out.WriteByte('$')
			}
			i += 2
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return fmt.Errorf("unterminated ${ at offset %d; write ${kind.name.attribute} or $$ for a literal $", i)
		}
		key := strings.TrimSpace(s[i+2 : i+2+end])
		if key == "" {
			return fmt.Errorf("empty ${} at offset %d", i)
		}
		v, err := fn(Ref{Key: key, Offset: i})
		if err != nil {
			return err
		}
		if out != nil {
			out.WriteString(v)
		}
		i += 2 + end + 1
	}
	return nil
}

// refTable lists, per kind and name, the attributes a reference may use.
func (s *Scenario) refTable() map[string]map[string][]string {
	t := map[string]map[string][]string{
		"dependencies": {}, "proxies": {}, "services": {},
	}
	for _, d := range s.Dependencies {
		switch {
		case d.Postgres != nil:
			t["dependencies"][d.Name] = []string{"addr", "dsn", "host", "port"}
		case d.HTTPStub != nil:
			t["dependencies"][d.Name] = []string{"addr", "host", "port", "url"}
		default:
			t["dependencies"][d.Name] = []string{"addr", "host", "port"}
		}
	}
	for _, p := range s.Proxies {
		t["proxies"][p.Name] = []string{"addr", "host", "port"}
	}
	for _, v := range s.Services {
		t["services"][v.Name] = []string{"addr", "url"}
	}
	return t
}

// envPrefix starts a reference to drill's own environment, ${env.NAME}.
const envPrefix = "env."

// EnvRefs returns the names of the environment variables the scenario's
// string values reference as ${env.NAME}, sorted, each once. Malformed
// references are left to validation.
func (s *Scenario) EnvRefs() []string {
	seen := map[string]bool{}
	walkStrings(reflect.ValueOf(s).Elem(), "", func(_, v string) {
		if !strings.Contains(v, "${") {
			return
		}
		refs, _ := Refs(v)
		for _, r := range refs {
			if name, ok := strings.CutPrefix(r.Key, envPrefix); ok && envNameRE.MatchString(name) {
				seen[name] = true
			}
		}
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// EnvVars returns the expansion variables of the scenario's ${env.NAME}
// references ("env.NAME" -> value), read with lookup (os.LookupEnv in
// drill); variables lookup does not find are left out, so [Expand] fails
// on them. Every value is a secret: callers redact it wherever it could be
// written.
func (s *Scenario) EnvVars(lookup func(string) (string, bool)) map[string]string {
	vars := map[string]string{}
	for _, name := range s.EnvRefs() {
		if v, ok := lookup(name); ok {
			vars[envPrefix+name] = v
		}
	}
	return vars
}

// checkRef says what is wrong with reference key, or "" when it resolves.
func (s *Scenario) checkRef(key string, table map[string]map[string][]string) string {
	if key == "run.id" {
		return ""
	}
	if name, ok := strings.CutPrefix(key, envPrefix); ok {
		if !envNameRE.MatchString(name) {
			return fmt.Sprintf("malformed reference ${%s}; write ${env.NAME} with NAME an environment variable name (letters, digits, _)", key)
		}
		if _, set := os.LookupEnv(name); !set {
			return fmt.Sprintf("${%s}: environment variable %s is not set in drill's environment", key, name)
		}
		return ""
	}
	parts := strings.Split(key, ".")
	kinds := []string{"dependencies", "env", "proxies", "run", "services"}
	if parts[0] == "run" {
		return fmt.Sprintf("unknown reference ${%s}; the run exposes only ${run.id}", key)
	}
	names, ok := table[parts[0]]
	if !ok {
		return fmt.Sprintf("unknown reference ${%s}%s; write ${<kind>.<name>.<attribute>} with kind one of %s",
			key, suggest(parts[0], kinds), strings.Join(kinds, ", "))
	}
	if len(parts) != 3 {
		return fmt.Sprintf("malformed reference ${%s}; write ${%s.<name>.<attribute>}", key, parts[0])
	}
	attrs, ok := names[parts[1]]
	if !ok {
		known := make([]string, 0, len(names))
		for n := range names {
			known = append(known, n)
		}
		sort.Strings(known)
		list := "none are defined"
		if len(known) > 0 {
			list = "known: " + strings.Join(known, ", ")
		}
		return fmt.Sprintf("reference ${%s} names no %s %q; %s", key, singular(parts[0]), parts[1], list)
	}
	for _, a := range attrs {
		if a == parts[2] {
			return ""
		}
	}
	return fmt.Sprintf("reference ${%s}: %s %q has no attribute %q; known: %s",
		key, singular(parts[0]), parts[1], parts[2], strings.Join(attrs, ", "))
}

// SampleVars returns a value for every reference the scenario can make,
// shaped like the real ones (loopback addresses on port 1; ${env.NAME}
// references get their real values when set). Validation uses it to check
// that expanded URLs and addresses are well-formed.
func (s *Scenario) SampleVars() map[string]string {
	vars := s.EnvVars(os.LookupEnv)
	vars["run.id"] = "run-00000000"
	for kind, names := range s.refTable() {
		for name, attrs := range names {
			for _, a := range attrs {
				vars[kind+"."+name+"."+a] = sampleValue(a)
			}
		}
	}
	return vars
}

func sampleValue(attr string) string {
	switch attr {
	case "addr":
		return "127.0.0.1:1"
	case "host":
		return "127.0.0.1"
	case "port":
		return "1"
	case "dsn":
		return "postgres://drill@127.0.0.1:1/drill?sslmode=disable"
	case "url":
		return "http://127.0.0.1:1"
	}
	return "x"
}

func singular(kind string) string {
	switch kind {
	case "dependencies":
		return "dependency"
	case "proxies":
		return "proxy"
	case "services":
		return "service"
	}
	return kind
}

// suggest returns ` (did you mean "x"?)` for a near miss, else "".
func suggest(got string, known []string) string {
	if c := closest(got, known); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}
