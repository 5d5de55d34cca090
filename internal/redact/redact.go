// Package redact is drill's one home for the rules that keep secrets out of
// everything drill writes: run.json, report.html, junit.xml, the terminal
// summary, logs (drill's own and the replicas' pod logs), `drill plan` and
// `drill validate` output, and error messages that echo scenario values.
//
// The rules, all case-insensitive:
//
//   - Header values: a header named in [DefaultHeaders], in the scenario's
//     redact.headers, or whose name contains one of [HeaderWords].
//   - URL userinfo: the password of user:password@ in any URL.
//   - Query values: a query (or key=value) key named in [DefaultQueryKeys],
//     in the scenario's redact.queryKeys, or containing one of [KeyWords].
//   - Connection strings: the password of a URL-form DSN (userinfo) and the
//     value of password= (and every other sensitive key=) in a key=value DSN.
//   - Environment variables: the whole value of a variable whose name
//     matches [SensitiveEnvName]; other values get the text rules.
//   - Bodies: a request body is recorded as its size and a sha256 prefix,
//     never its text ([Redactor.Body]).
//   - Known values: every secret value the run knows (values read with
//     ${env.NAME}, basicAuth credentials, values found by the rules above in
//     the scenario), wherever it appears in free text, when at least
//     [MinValueLen] bytes long.
//
// A redacted value is replaced by [Redacted]. Redaction is idempotent:
// redacting redacted text changes nothing.
package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces every secret value drill would otherwise write.
const Redacted = "REDACTED"

// MinValueLen is the shortest known secret value (in bytes) replaced
// wherever it appears in free text; shorter values would mangle ordinary
// text and are redacted only where the rules place them.
const MinValueLen = 4

// DefaultHeaders returns the header names whose values are always
// redacted (compared case-insensitively).
func DefaultHeaders() []string {
	return []string{
		"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
		"X-Api-Key", "Api-Key", "X-Auth-Token", "X-Access-Token",
		"X-Csrf-Token", "X-Xsrf-Token", "X-Amz-Security-Token",
		"X-Vault-Token", "Private-Token",
	}
}

// HeaderWords returns the words that make any header name containing them
// sensitive (lower case; e.g. X-Tenant-Secret, X-Session-Id).
func HeaderWords() []string {
	return []string{"auth", "token", "secret", "password", "passwd", "apikey", "api-key", "api_key",
		"credential", "signature", "session", "cookie"}
}

// DefaultQueryKeys returns the query and key=value keys whose values are
// always redacted (compared case-insensitively).
func DefaultQueryKeys() []string {
	return []string{
		"token", "access_token", "refresh_token", "id_token", "api_key", "apikey", "api-key",
		"key", "password", "passwd", "pwd", "pass", "secret", "client_secret",
		"sig", "signature", "auth", "session", "sessionid", "credential", "credentials",
		"x-amz-signature", "x-amz-credential", "x-amz-security-token",
	}
}

// KeyWords returns the words that make any query or key=value key
// containing them sensitive (lower case; e.g. private_token, db_password).
func KeyWords() []string {
	return []string{"token", "secret", "password", "passwd", "apikey", "api_key", "api-key",
		"signature", "credential"}
}

// envWords are matched anywhere in an environment variable's name;
// envExactWords only as a whole word (between _ - . or the ends).
var (
	envWords      = []string{"PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "APIKEY", "API_KEY", "PRIVATE_KEY"}
	envExactWords = []string{"PAT", "KEY", "PASS", "AUTH", "AUTHORIZATION", "COOKIE", "SIG", "SIGNATURE"}
)

// SensitiveEnvName reports whether an environment variable's value is
// redacted whole: its name (case-insensitive) contains PASSWORD, PASSWD,
// SECRET, TOKEN, CREDENTIAL, APIKEY, API_KEY or PRIVATE_KEY, or has PAT,
// KEY, PASS, AUTH, AUTHORIZATION, COOKIE, SIG or SIGNATURE as a word
// (words are separated by _ - or .): GITHUB_PAT, AWS_SECRET_ACCESS_KEY and
// DB_PASS are sensitive; PATH, KEYCLOAK_URL and MONKEY are not.
func SensitiveEnvName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range envWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(n, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		for _, x := range envExactWords {
			if w == x {
				return true
			}
		}
	}
	return false
}

// Options add to the default rules.
type Options struct {
	// Headers are further header names to redact (any case).
	Headers []string
	// QueryKeys are further query and key=value keys to redact (any case).
	QueryKeys []string
	// Values are known secret values, redacted wherever they appear in
	// free text (values shorter than [MinValueLen] are ignored there).
	Values []string
}

// Redactor applies the rules. A nil *Redactor applies the default rules
// with no extra names and no known values. Safe for concurrent use; it is
// not changed after [New].
type Redactor struct {
	headers map[string]bool
	keys    map[string]bool
	values  []string // longest first
}

// New returns a Redactor with the default rules plus o.
func New(o Options) *Redactor {
	r := &Redactor{headers: map[string]bool{}, keys: map[string]bool{}}
	for _, h := range DefaultHeaders() {
		r.headers[strings.ToLower(h)] = true
	}
	for _, h := range o.Headers {
		r.headers[strings.ToLower(strings.TrimSpace(h))] = true
	}
	for _, k := range DefaultQueryKeys() {
		r.keys[strings.ToLower(k)] = true
	}
	for _, k := range o.QueryKeys {
		r.keys[strings.ToLower(strings.TrimSpace(k))] = true
	}
	seen := map[string]bool{}
	for _, v := range o.Values {
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if len(form) >= MinValueLen && form != Redacted && !seen[form] {
				seen[form] = true
				r.values = append(r.values, form)
			}
		}
	}
	sort.SliceStable(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// defaults is what a nil *Redactor stands for.
var defaults = New(Options{})

func (r *Redactor) rules() *Redactor {
	if r == nil {
		return defaults
	}
	return r
}

// SensitiveHeader reports whether a header's value is redacted.
func (r *Redactor) SensitiveHeader(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	if r.rules().headers[n] {
		return true
	}
	for _, w := range HeaderWords() {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// SensitiveKey reports whether the value of a query key or of a key=value
// pair (a key=value DSN, a --flag=value) is redacted: the key is
// sensitive as a query key, a header name or an environment variable name.
func (r *Redactor) SensitiveKey(key string) bool {
	k := strings.ToLower(strings.TrimSpace(key))
	if r.rules().keys[k] {
		return true
	}
	for _, w := range KeyWords() {
		if strings.Contains(k, w) {
			return true
		}
	}
	return r.SensitiveHeader(k) || SensitiveEnvName(k)
}

// Header returns the value of header name as drill may write it:
// [Redacted] for a sensitive header, else value with the text rules.
func (r *Redactor) Header(name, value string) string {
	if value == "" {
		return ""
	}
	if r.SensitiveHeader(name) {
		return Redacted
	}
	return r.Text(value)
}

// Env returns the value of environment variable name as drill may write
// it: [Redacted] for a sensitive name ([SensitiveEnvName]), else value
// with the text rules (URL and key=value connection strings lose their
// passwords).
func (r *Redactor) Env(name, value string) string {
	if value == "" {
		return ""
	}
	if SensitiveEnvName(name) {
		return Redacted
	}
	return r.Text(value)
}

// bodyPrefix starts every redacted body.
const bodyPrefix = Redacted + " ("

// Body returns a request body as drill may write it: "" for an empty body,
// else "REDACTED (<n> bytes, sha256:<first 16 hex digits>)" of the body as
// written (a template before rendering). A body already in that form is
// returned as it is.
func (r *Redactor) Body(b string) string {
	if b == "" || (strings.HasPrefix(b, bodyPrefix) && strings.Contains(b, "sha256:")) {
		return b
	}
	sum := sha256.Sum256([]byte(b))
	return fmt.Sprintf("%s%d bytes, sha256:%s)", bodyPrefix, len(b), hex.EncodeToString(sum[:])[:16])
}

// Args returns argv as drill may write it: each element with the text
// rules, and the element after a flag with a sensitive name ("--password
// x", "-token x") replaced by [Redacted].
func (r *Redactor) Args(argv []string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		if i > 0 && r.SecretFlag(argv[i-1]) && !strings.HasPrefix(a, "-") {
			out[i] = Redacted
			continue
		}
		out[i] = r.Text(a)
	}
	return out
}

// SecretFlag reports whether argument a is a flag with a sensitive name
// written without its value ("--password", "-token"): the next argument
// is its value.
func (r *Redactor) SecretFlag(a string) bool {
	if !strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	return name != "" && r.SensitiveKey(name)
}

// SecretsIn returns the values the text rules would redact in s as URL
// passwords and values of sensitive key=value pairs (query strings,
// key=value DSNs), in order.
func (r *Redactor) SecretsIn(s string) []string {
	r = r.rules()
	var out []string
	if strings.Contains(s, "@") {
		for _, m := range userinfoRE.FindAllStringSubmatch(s, -1) {
			out = append(out, m[2])
		}
	}
	if !strings.Contains(s, "=") {
		return out
	}
	for pos := 0; pos < len(s); {
		loc := nameRE.FindStringSubmatchIndex(s[pos:])
		if loc == nil {
			break
		}
		end := pos + loc[1]
		if s[pos+loc[4]] == '=' && r.SensitiveKey(s[pos+loc[2]:pos+loc[3]]) {
			from, to := valueSpan(s, end, '=')
			out = append(out, s[from:to])
			end = max(end, to)
		}
		pos = end
	}
	return out
}

// userinfoRE matches scheme://user:password@ in free text.
var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:"'<>]*):([^/?#@\s"'<>]*)@`)

// nameRE matches a name followed by ":" or "=" (a header line, a JSON or
// Go map key, a query or key=value pair): 1 the name, 2 the separator.
var nameRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_-]*)"?[ \t]*([:=])[ \t]*`)

// authSchemes are HTTP auth schemes that precede a credential after
// "Authorization:".
var authSchemes = []string{"bearer", "basic", "digest", "token", "negotiate", "ntlm", "apikey"}

// Text returns s as drill may write it: known secret values, URL
// passwords, the values of sensitive headers written "Name: value",
// "Name=value", `"Name":"value"` or "Name:[value]", and the values of
// sensitive query and key=value keys are replaced by [Redacted]. "Name:"
// is not a header line where Name ends a scenario field path rooted at a
// list item ("s.yaml: streams[0].targets[0].headers.Authorization: unknown
// reference"): the message after it stays readable.
func (r *Redactor) Text(s string) string {
	if s == "" {
		return s
	}
	r = r.rules()
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	if strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
			sub := userinfoRE.FindStringSubmatch(m)
			if sub[2] == "" {
				return m
			}
			return sub[1] + ":" + Redacted + "@"
		})
	}
	if !strings.ContainsAny(s, ":=") {
		return s
	}
	var b strings.Builder
	pos := 0
	for pos < len(s) {
		loc := nameRE.FindStringSubmatchIndex(s[pos:])
		if loc == nil {
			break
		}
		name := s[pos+loc[2] : pos+loc[3]]
		sep := s[pos+loc[4]]
		end := pos + loc[1]
		var secret bool
		switch {
		case sep == ':' && fieldPathKey(s, pos+loc[2]):
			// "streams[0].headers.Authorization: unknown reference":
			// the last key of a field path in a message about the
			// scenario, not a header line; the scenario's own
			// redaction has already hidden the values such a message
			// quotes.
		case sep == '=':
			secret = r.SensitiveKey(name)
		default:
			secret = r.SensitiveHeader(name)
		}
		if !secret {
			b.WriteString(s[pos:end])
			pos = end
			continue
		}
		from, to := valueSpan(s, end, sep)
		b.WriteString(s[pos:from])
		if to > from {
			b.WriteString(Redacted)
		}
		pos = to
	}
	if pos == 0 {
		return s
	}
	b.WriteString(s[pos:])
	return b.String()
}

// indexedSegmentRE matches the first segment of a scenario field path that
// lies inside a list: streams[0], services[1].
var indexedSegmentRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*(\[[0-9]+\])+$`)

// fieldPathKey reports whether the name starting at i in s is the last key
// of a scenario field path, as in "s.yaml: streams[0].targets[0].headers.
// Authorization: unknown reference ${env.X}": it follows a '.', and the
// path runs back (over names, indexes and dots) to a first segment with an
// index, at the start of s or after a space. A dotted name without such a
// root is a header line like any other: "req.Header.Authorization: Bearer
// x" in a log line, or a JSON key "req.headers.cookie".
func fieldPathKey(s string, i int) bool {
	if i == 0 || s[i-1] != '.' {
		return false
	}
	j := i - 1
	for j > 0 && strings.IndexByte(pathBytes, s[j-1]) >= 0 {
		j--
	}
	if j > 0 && s[j-1] != ' ' && s[j-1] != '\t' {
		return false
	}
	first, _, _ := strings.Cut(s[j:i-1], ".")
	return indexedSegmentRE.MatchString(first)
}

// pathBytes are the bytes of a scenario field path besides letters and
// digits.
const pathBytes = "._-[]0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// valueSpan returns the span [from, to) of the value that starts at i in s
// after separator sep; quotes and brackets around it stay outside.
func valueSpan(s string, i int, sep byte) (int, int) {
	if i >= len(s) {
		return i, i
	}
	switch q := s[i]; q {
	case '"', '\'':
		j := i + 1
		for j < len(s) && s[j] != q {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		return i + 1, min(j, len(s))
	case '[':
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			return i + 1, len(s)
		}
		return i + 1, i + j
	}
	if sep == '=' {
		return i, i + tokenLen(s[i:], " \t\r\n&;,\"'])#")
	}
	j := i
	// "Authorization: Bearer x": the scheme is part of the value.
	for _, sc := range authSchemes {
		if len(s)-j > len(sc) && strings.EqualFold(s[j:j+len(sc)], sc) && s[j+len(sc)] == ' ' {
			j += len(sc) + 1
			break
		}
	}
	j += tokenLen(s[j:], " \t\r\n\",;]")
	// "Cookie: a=b; c=d": further pairs belong to the value.
	for j < len(s) && s[j] == ';' {
		k := j + 1
		for k < len(s) && s[k] == ' ' {
			k++
		}
		n := tokenLen(s[k:], " \t\r\n\",;]")
		if n == 0 {
			break
		}
		j = k + n
	}
	return i, j
}

// tokenLen is the length of the prefix of s without any byte of stop.
func tokenLen(s, stop string) int {
	if i := strings.IndexAny(s, stop); i >= 0 {
		return i
	}
	return len(s)
}
