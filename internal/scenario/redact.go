package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/drillhq/drill/internal/redact"
)

// Redaction keeps secrets out of everything drill writes: run.json,
// seconds.jsonl, report.html, junit.xml, the terminal summary, logs
// (drill's and the replicas' pod logs), drill plan and drill validate
// output and error messages. The rule: a value is recorded only where
// drill knows it carries no secret; every other value reads REDACTED.
// Request header values are recorded only for Accept, Accept-Charset,
// Accept-Encoding, Accept-Language, Cache-Control, Connection,
// Content-Encoding, Content-Language, Content-Length, Content-Type,
// If-Match, If-Modified-Since, If-None-Match, Pragma, Range, Traceparent,
// User-Agent, X-Correlation-Id, the X-Request-* family and allowHeaders.
// All of a URL's userinfo is replaced, a lone user (https://token@host) as
// well as user:password, in connection strings too. URL query values are
// recorded only for the keys page, per_page, page_size, limit, offset,
// sort, order, format, lang, locale, sslmode, connect_timeout,
// application_name and allowQueryKeys, and where the value is harmless
// (below). Env values (services' env, setup env, environment.compose.env)
// are recorded only where the value is harmless: a number of fewer than
// 12 digits, a duration with units (30s), a boolean (true, false, yes, no,
// on, off), or made only of drill's references; or where allowEnv names
// the variable. A value written only as ${...} references (${env.NAME},
// ${proxies.NAME.addr}, "Bearer ${env.API_TOKEN}", http://${services.NAME.addr})
// is recorded as written in every field, basicAuth passwords and
// sensitive headers included: the reference is no secret, the value it
// expands to is, and that value is redacted wherever it appears. Names the
// rules call sensitive stay redacted whatever their literal value looks
// like, allowed or not: the headers Authorization, Proxy-Authorization,
// Cookie, Set-Cookie, X-Api-Key, Api-Key, X-Auth-Token, X-Access-Token,
// X-Csrf-Token, X-Xsrf-Token, X-Amz-Security-Token, X-Vault-Token,
// Private-Token and any header whose name contains auth, token, secret,
// password, passwd, apikey, api-key, api_key, credential, signature,
// session or cookie (also in free text, "Name: value"); the query and
// key=value keys token, access_token, refresh_token, id_token, api_key,
// apikey, api-key, key, password, passwd, pwd, pass, secret, client_secret,
// sig, signature, auth, session, sessionid, credential, credentials,
// X-Amz-Signature, X-Amz-Credential and X-Amz-Security-Token and any key
// containing token, secret, password, passwd, apikey, api_key, api-key,
// signature or credential (so password= in a key=value DSN, also in free
// text); env variables whose name contains PASSWORD, PASSWD, SECRET,
// TOKEN, CREDENTIAL, APIKEY, API_KEY or PRIVATE_KEY or has the word PAT,
// KEY, PASS, AUTH, AUTHORIZATION, COOKIE, SIG or SIGNATURE (words split at
// _ - .; GITHUB_PAT yes, PATH no). In free text such as log lines, a key
// whose last word is failed, successful, removed, total or count keeps a
// boolean or whole-number value (authentication_failed=true). Also
// redacted: basicAuth passwords (and the username when the password is
// empty, the form of an API key sent as the user); the argument after a
// command-line flag with a sensitive name (--password x); request bodies,
// recorded as their size and a sha256 prefix; and every value read with
// ${env.NAME} or found by these rules (values redacted only because no
// allow list keeps them when at least 8 bytes long), wherever else it
// appears.
type Redaction struct {
	// Headers are further header names whose values are redacted (any
	// case), even when allowed.
	Headers []string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// QueryKeys are further URL query and key=value keys whose values are
	// redacted (any case), even when allowed.
	QueryKeys []string `yaml:"queryKeys,omitempty" json:"queryKeys,omitempty"`
	// AllowHeaders are further request headers whose values are recorded
	// (any case; a trailing * stands for every header it starts, e.g.
	// X-Build-*). A header the rules call sensitive cannot be allowed.
	AllowHeaders []string `yaml:"allowHeaders,omitempty" json:"allowHeaders,omitempty"`
	// AllowQueryKeys are further URL query keys whose values are recorded
	// (any case). A key the rules call sensitive cannot be allowed.
	AllowQueryKeys []string `yaml:"allowQueryKeys,omitempty" json:"allowQueryKeys,omitempty"`
	// AllowEnv are environment variable names (services' env, setup env,
	// environment.compose.env) whose values are recorded, with URL
	// userinfo and sensitive query values still redacted (any case). A
	// name the rules call sensitive cannot be allowed.
	AllowEnv []string `yaml:"allowEnv,omitempty" json:"allowEnv,omitempty"`
}

// Redactor returns the redaction rules of a run of s (internal/redact):
// the default rules, the names s.Redact adds and allows, and as known
// values the given values (those read with ${env.NAME}) plus every secret
// the rules find written in s: the values of headers of targets and probes
// that are not recorded, basicAuth passwords (and usernames sent without
// one), env values of services, setups and environment.compose.env that
// are not recorded, secret flag arguments of services and setups, and URL
// userinfo and redacted query and key=value values in any string. Values
// redacted only because no allow list keeps them (their name is on no
// sensitive list) are known values when at least
// redact.MinUnnamedValueLen bytes long and not harmless by their form. A
// nil s gives the default rules plus values.
func (s *Scenario) Redactor(values ...string) *redact.Redactor {
	o := redact.Options{Values: append([]string(nil), values...)}
	if s == nil {
		return redact.New(o)
	}
	o.Headers = s.Redact.Headers
	o.QueryKeys = s.Redact.QueryKeys
	o.AllowHeaders = s.Redact.AllowHeaders
	o.AllowQueryKeys = s.Redact.AllowQueryKeys
	o.AllowEnv = s.Redact.AllowEnv
	rules := redact.New(o)
	add := func(v string) {
		if v != "" && !strings.Contains(v, "${") && v != redact.Redacted {
			o.Values = append(o.Values, v)
		}
	}
	addUnnamed := func(v string) {
		if len(v) >= redact.MinUnnamedValueLen && !redact.Harmless(v) {
			add(v)
		}
	}
	header := func(name, v string) {
		switch {
		case rules.Header(name, v) != redact.Redacted:
		case rules.SensitiveHeader(name):
			add(v)
			// "Bearer x": x alone may show up elsewhere.
			if _, cred, ok := strings.Cut(v, " "); ok {
				add(strings.TrimSpace(cred))
			}
		default:
			addUnnamed(v)
		}
	}
	env := func(vars map[string]string) {
		for k, v := range vars {
			if rules.SecretEnvValue(k, v) {
				add(v)
			}
		}
	}
	flags := func(argvs ...[]string) {
		for _, argv := range argvs {
			for i := 1; i < len(argv); i++ {
				if rules.SecretFlag(argv[i-1]) && !strings.HasPrefix(argv[i], "-") {
					add(argv[i])
				}
			}
		}
	}
	for _, st := range s.Streams {
		if ba := st.BasicAuth; ba != nil {
			add(ba.Password)
			if ba.Password == "" {
				add(ba.Username)
			}
		}
		for _, t := range st.Targets {
			for k, v := range t.Headers {
				header(k, v)
			}
		}
	}
	for _, svc := range s.Services {
		flags(svc.Command, svc.Args)
		env(svc.Env)
		if su := svc.Setup; su != nil {
			flags(su.Command, su.Args)
			env(su.Env)
		}
		for _, p := range []*Probe{svc.Probes.StartupProbe, svc.Probes.LivenessProbe, svc.Probes.ReadinessProbe} {
			if p != nil && p.HTTPGet != nil {
				for _, h := range p.HTTPGet.HTTPHeaders {
					header(h.Name, h.Value)
				}
				for _, x := range rules.PathSecrets(p.HTTPGet.Path) {
					add(x)
				}
			}
		}
	}
	// environment.compose.env reaches the containers' environment through
	// the Compose file's ${VAR}: the same rule as a service's env.
	if c := s.Environment.Compose; c != nil {
		env(c.Env)
	}
	walkStrings(reflect.ValueOf(s).Elem(), "", func(_, v string) {
		for _, x := range rules.SecretsIn(v) {
			add(x)
		}
	})
	return redact.New(o)
}

// Redacted returns a copy of s, sharing nothing it changes with s, as
// drill may write it with r's rules: header values (targets and probes)
// go through r.Header; basicAuth passwords (and the username when the
// password is empty) read REDACTED unless written only as references; env
// values of services, setups and environment.compose.env go through r.Env;
// commands and args of services, setups and exec probes through r.Args;
// probe paths through r.Path (query values);
// target bodies through r.Body (size and sha256 prefix); and every other
// string through r.Text (URL userinfo, query values).
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
	case *HTTPGetAction:
		d.Path = r.Path(src.(HTTPGetAction).Path)
	case *HTTPHeader:
		s := src.(HTTPHeader)
		d.Value = r.Header(s.Name, s.Value)
	case *BasicAuth:
		s := src.(BasicAuth)
		if s.Password != "" && !redact.OnlyReferences(s.Password) {
			d.Password = redact.Redacted
		}
		if s.Password == "" && s.Username != "" && !redact.OnlyReferences(s.Username) {
			d.Username = redact.Redacted
		}
	case *Setup:
		s := src.(Setup)
		for k, v := range s.Env {
			d.Env[k] = r.Env(k, v)
		}
		d.Command = r.Args(s.Command)
		d.Args = r.Args(s.Args)
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
// rules: its last key names a sensitive header, key or env variable, it is
// a header or env value the rules do not record, or it is a body or a
// probe header's value.
func sensitivePath(r *redact.Redactor, path string) bool {
	last, parent := path, ""
	if strings.HasSuffix(path, `"]`) {
		if i := strings.LastIndex(path, `["`); i >= 0 {
			if k, err := strconv.Unquote(path[i+1 : len(path)-1]); err == nil {
				last, parent = k, path[:i]
			}
		}
	} else if i := strings.LastIndexByte(path, '.'); i >= 0 {
		last, parent = path[i+1:], path[:i]
	}
	if i := strings.IndexByte(last, '['); i >= 0 && !strings.HasSuffix(path, `"]`) {
		last = last[:i]
	}
	switch {
	case last == "body":
		return true
	case last == "value" && strings.Contains(path, "httpHeaders["):
		return true
	case strings.HasSuffix(parent, ".headers") && !r.AllowedHeader(last):
		return true
	case strings.HasSuffix(parent, ".env") && !r.AllowedEnv(last):
		return true
	}
	return r.SensitiveHeader(last) || r.SensitiveKey(last) || redact.SensitiveEnvName(last)
}

// redaction checks s.Redact: names are header tokens, query keys and env
// names; nothing the rules call sensitive is allowed.
func (v *validator) redaction() {
	rd := redact.New(redact.Options{})
	for i, h := range v.s.Redact.Headers {
		if !tokenRE.MatchString(h) {
			v.errorf(fmt.Sprintf("redact.headers[%d]", i), "invalid header name %q", h)
		}
	}
	for i, k := range v.s.Redact.QueryKeys {
		if strings.TrimSpace(k) == "" {
			v.errorf(fmt.Sprintf("redact.queryKeys[%d]", i), "a query key must not be empty")
		}
	}
	redacted := map[string]bool{}
	for _, h := range v.s.Redact.Headers {
		redacted[strings.ToLower(h)] = true
	}
	for i, h := range v.s.Redact.AllowHeaders {
		p := fmt.Sprintf("redact.allowHeaders[%d]", i)
		name := strings.TrimSuffix(h, "*")
		switch {
		case !tokenRE.MatchString(name):
			v.errorf(p, "invalid header name %q (a trailing * may stand for the rest of the name)", h)
		case rd.SensitiveHeader(name) || redacted[strings.ToLower(h)]:
			v.errorf(p, "%q names a header drill always redacts (see Redaction); it cannot be allowed", h)
		}
	}
	for _, k := range v.s.Redact.QueryKeys {
		redacted[strings.ToLower(k)] = true
	}
	for i, k := range v.s.Redact.AllowQueryKeys {
		p := fmt.Sprintf("redact.allowQueryKeys[%d]", i)
		switch {
		case strings.TrimSpace(k) == "":
			v.errorf(p, "a query key must not be empty")
		case rd.SensitiveKey(k) || redacted[strings.ToLower(k)]:
			v.errorf(p, "%q names a query key drill always redacts (see Redaction); it cannot be allowed", k)
		}
	}
	for i, k := range v.s.Redact.AllowEnv {
		p := fmt.Sprintf("redact.allowEnv[%d]", i)
		switch {
		case !envNameRE.MatchString(k):
			v.errorf(p, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", k)
		case redact.SensitiveEnvName(k):
			v.errorf(p, "%q names a variable drill always redacts (see Redaction); it cannot be allowed", k)
		}
	}
}
