package scenario

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/drillhq/drill/internal/redact"
)

// Redactor returns the redaction rules of a run of s (internal/redact):
// the default rules, the header names and query keys of s.Redact, and as
// known values the given values (those read with ${env.NAME}) plus every
// secret the rules find written in s: sensitive header values of targets
// and probes, basicAuth passwords, sensitive env values and secret flag
// arguments of services, sensitive environment.compose.env values, and URL
// passwords and sensitive query and key=value values in any string. A nil
// s gives the default rules plus values.
func (s *Scenario) Redactor(values ...string) *redact.Redactor {
	o := redact.Options{Values: append([]string(nil), values...)}
	if s == nil {
		return redact.New(o)
	}
	o.Headers = s.Redact.Headers
	o.QueryKeys = s.Redact.QueryKeys
	rules := redact.New(o)
	add := func(v string) {
		if v != "" && !strings.Contains(v, "${") && v != redact.Redacted {
			o.Values = append(o.Values, v)
		}
	}
	for _, st := range s.Streams {
		if st.BasicAuth != nil {
			add(st.BasicAuth.Password)
		}
		for _, t := range st.Targets {
			for k, v := range t.Headers {
				if rules.SensitiveHeader(k) {
					add(v)
					// "Bearer x": x alone may show up elsewhere.
					if _, cred, ok := strings.Cut(v, " "); ok {
						add(strings.TrimSpace(cred))
					}
				}
			}
		}
	}
	for _, svc := range s.Services {
		for _, argv := range [][]string{svc.Command, svc.Args} {
			for i := 1; i < len(argv); i++ {
				if rules.SecretFlag(argv[i-1]) && !strings.HasPrefix(argv[i], "-") {
					add(argv[i])
				}
			}
		}
		for k, v := range svc.Env {
			if redact.SensitiveEnvName(k) {
				add(v)
			}
		}
		for _, p := range []*Probe{svc.Probes.StartupProbe, svc.Probes.LivenessProbe, svc.Probes.ReadinessProbe} {
			if p != nil && p.HTTPGet != nil {
				for _, h := range p.HTTPGet.HTTPHeaders {
					if rules.SensitiveHeader(h.Name) {
						add(h.Value)
					}
				}
			}
		}
	}
	// environment.compose.env reaches the containers' environment through
	// the Compose file's ${VAR}: the same rule as a service's env.
	if c := s.Environment.Compose; c != nil {
		for k, v := range c.Env {
			if redact.SensitiveEnvName(k) {
				add(v)
			}
		}
	}
	walkStrings(reflect.ValueOf(s).Elem(), "", func(_, v string) {
		for _, x := range rules.SecretsIn(v) {
			add(x)
		}
	})
	return redact.New(o)
}

// Redacted returns a copy of s, sharing nothing it changes with s, as
// drill may write it with r's rules: sensitive header values (targets and
// probes) and basicAuth passwords read REDACTED, service env values and
// environment.compose.env values go through r.Env, commands and args through r.Args, target bodies through
// r.Body (size and sha256 prefix), and every other string through r.Text.
// The timeline and the assertions are copied unchanged, so a redacted
// scenario judges a recorded run as the original does. s is not modified;
// a nil s gives nil.
func (s *Scenario) Redacted(r *redact.Redactor) *Scenario {
	if s == nil {
		return nil
	}
	c := redactCopy(r, reflect.ValueOf(s).Elem()).Interface().(Scenario)
	return &c
}

// Types whose values are copied unchanged: what judging a run reads.
var (
	assertionType = reflect.TypeFor[Assertion]()
	timelineType  = reflect.TypeFor[Timeline]()
	positionsType = reflect.TypeFor[map[string]Position]()
)

// redactCopy returns a redacted deep copy of v (a new value of v's type).
func redactCopy(r *redact.Redactor, v reflect.Value) reflect.Value {
	t := v.Type()
	if t == assertionType || t == timelineType || t == positionsType {
		return v
	}
	switch v.Kind() {
	case reflect.String:
		n := reflect.New(t).Elem()
		n.SetString(r.Text(v.String()))
		return n
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		n := reflect.New(t.Elem())
		n.Elem().Set(redactCopy(r, v.Elem()))
		return n
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			n.Index(i).Set(redactCopy(r, v.Index(i)))
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		n := reflect.MakeMapWithSize(t, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			n.SetMapIndex(iter.Key(), redactCopy(r, iter.Value()))
		}
		return n
	case reflect.Struct:
		n := reflect.New(t).Elem()
		n.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() {
				n.Field(i).Set(redactCopy(r, v.Field(i)))
			}
		}
		redactFields(r, n.Addr().Interface(), v.Interface())
		return n
	}
	return v
}

// redactFields applies the rules that depend on where a string sits; dst
// is a pointer to the copy (already text-redacted), src the original.
func redactFields(r *redact.Redactor, dst, src any) {
	switch d := dst.(type) {
	case *Target:
		s := src.(Target)
		for k, v := range s.Headers {
			d.Headers[k] = r.Header(k, v)
		}
		d.Body = r.Body(s.Body)
	case *HTTPHeader:
		s := src.(HTTPHeader)
		d.Value = r.Header(s.Name, s.Value)
	case *BasicAuth:
		if d.Password != "" {
			d.Password = redact.Redacted
		}
	case *Service:
		s := src.(Service)
		for k, v := range s.Env {
			d.Env[k] = r.Env(k, v)
		}
		d.Command = r.Args(s.Command)
		d.Args = r.Args(s.Args)
	case *ComposeEnv:
		for k, v := range src.(ComposeEnv).Env {
			d.Env[k] = r.Env(k, v)
		}
	case *ExecAction:
		d.Command = r.Args(src.(ExecAction).Command)
	}
}

// quotedRE matches a Go-quoted value in a message.
var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactMessage returns msg, the message of a problem at field path, as
// drill may print it with r's rules: when path names a sensitive field (a
// sensitive header, key or env variable name, a basicAuth password, a
// target body, a probe header's value) every quoted value in msg reads
// REDACTED; then r.Text applies.
func redactMessage(r *redact.Redactor, path, msg string) string {
	if path != "" && sensitivePath(r, path) {
		msg = quotedRE.ReplaceAllString(msg, `"`+redact.Redacted+`"`)
	}
	return r.Text(msg)
}

// sensitivePath reports whether the field at path holds a secret by the
// rules: its last key names a sensitive header, key or env variable, or
// it is a body or a probe header's value.
func sensitivePath(r *redact.Redactor, path string) bool {
	last := path
	if strings.HasSuffix(path, `"]`) {
		if i := strings.LastIndex(path, `["`); i >= 0 {
			if k, err := strconv.Unquote(path[i+1 : len(path)-1]); err == nil {
				last = k
			}
		}
	} else if i := strings.LastIndexByte(path, '.'); i >= 0 {
		last = path[i+1:]
	}
	if i := strings.IndexByte(last, '['); i >= 0 && !strings.HasSuffix(path, `"]`) {
		last = last[:i]
	}
	switch {
	case last == "body":
		return true
	case last == "value" && strings.Contains(path, "httpHeaders["):
		return true
	}
	return r.SensitiveHeader(last) || r.SensitiveKey(last) || redact.SensitiveEnvName(last)
}
