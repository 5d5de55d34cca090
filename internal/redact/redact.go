// Package redact is drill's one home for the rules that keep secrets out of
// everything drill writes: run.json, report.html, junit.xml, the terminal
// summary, logs (drill's own and the replicas' pod logs), `drill plan` and
// `drill validate` output, and error messages that echo scenario values.
//
// A value drill cannot tell harmless is recorded as [Redacted]: the rules
// keep what they know to carry no secret rather than hunt for secrets by
// name. All comparisons are case-insensitive.
//
//   - Header values: kept only for the headers of [AllowedHeaders] and the
//     scenario's redact.allowHeaders; every other header's value is
//     redacted. A header named in [DefaultHeaders] or the scenario's
//     redact.headers, or whose name contains one of [HeaderWords], is
//     redacted even when allowed, and in free text ("Name: value").
//   - URL userinfo: all of it, a lone user ("https://tok@host", the form of
//     error-tracking DSNs and git remotes) as well as user:password, in any
//     URL.
//   - Query values: kept only for the keys of [AllowedQueryKeys] and the
//     scenario's redact.allowQueryKeys, and for values that are harmless
//     ([Harmless]) or made of drill's references ([OnlyReferences]). A key
//     named in [DefaultQueryKeys] or the scenario's redact.queryKeys, or
//     containing one of [KeyWords], is redacted whatever its value, also in
//     key=value text outside URLs (a key=value DSN, logfmt).
//   - Environment variables: a value is kept only when it is harmless
//     ([Harmless]), made of drill's references, or its name is in the
//     scenario's redact.allowEnv; a name that [SensitiveEnvName] matches is
//     redacted whatever its value.
//   - References: a value written only as drill references
//     ("${env.API_TOKEN}", "Bearer ${env.API_TOKEN}",
//     "http://${proxies.pg.addr}") is recorded as written in every field,
//     a password or a sensitive header as well: a reference says where a
//     value comes from, never the value, and the value it expands to is a
//     known value (below).
//   - Counts and outcomes: a key that names one (its last word is failed,
//     successful, removed, total or count) followed by a boolean or a whole
//     number of fewer than 12 digits keeps its value in free text, even
//     when the key contains a sensitive word (authentication_failed=true);
//     any other value of a sensitive key is redacted.
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
	"time"
)

// Redacted replaces every secret value drill would otherwise write.
const Redacted = "REDACTED"

// MinValueLen is the shortest known secret value (in bytes) replaced
// wherever it appears in free text; shorter values would mangle ordinary
// text and are redacted only where the rules place them.
const MinValueLen = 4

// MinUnnamedValueLen is the shortest value (in bytes), redacted only
// because no allow list keeps it (its header, query key or env name is on
// no list of sensitive names), that is also replaced wherever it appears
// in free text; shorter ones (LOG_LEVEL's "info") would mangle ordinary
// text.
const MinUnnamedValueLen = 8

// AllowedHeaders returns the request headers whose values drill records
// (compared case-insensitively): headers that describe a request's form,
// never who sends it. A name ending in "*" stands for every header it
// starts (X-Request-* is X-Request-Id, X-Request-Start, ...).
func AllowedHeaders() []string {
	return []string{
		"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language",
		"Cache-Control", "Connection", "Content-Encoding", "Content-Language",
		"Content-Length", "Content-Type", "If-Match", "If-Modified-Since",
		"If-None-Match", "Pragma", "Range", "Traceparent", "User-Agent",
		"X-Correlation-Id", "X-Request-*",
	}
}

// AllowedQueryKeys returns the URL query keys whose values drill records
// whatever they hold (compared case-insensitively): paging, ordering,
// format and the connection options of PostgreSQL URLs.
func AllowedQueryKeys() []string {
	return []string{
		"page", "per_page", "page_size", "limit", "offset", "sort", "order",
		"format", "lang", "locale", "sslmode", "connect_timeout",
		"application_name",
	}
}

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
	// Headers are further header names to redact (any case), even when
	// allowed.
	Headers []string
	// QueryKeys are further query and key=value keys to redact (any case),
	// even when allowed.
	QueryKeys []string
	// AllowHeaders are further request headers whose values are recorded
	// (any case; a trailing "*" is a prefix). A sensitive header stays
	// redacted.
	AllowHeaders []string
	// AllowQueryKeys are further URL query keys whose values are recorded
	// (any case). A sensitive key stays redacted.
	AllowQueryKeys []string
	// AllowEnv are environment variable names whose values are recorded
	// (exact, any case). A name [SensitiveEnvName] matches stays redacted.
	AllowEnv []string
	// Values are known secret values, redacted wherever they appear in
	// free text (values shorter than [MinValueLen] are ignored there).
	Values []string
}

// Redactor applies the rules. A nil *Redactor applies the default rules
// with no extra names and no known values. Safe for concurrent use; it is
// not changed after [New].
type Redactor struct {
	headers      map[string]bool
	keys         map[string]bool
	allowHeaders map[string]bool
	allowPrefix  []string
	allowKeys    map[string]bool
	allowEnv     map[string]bool
	values       []string // longest first
}

// New returns a Redactor with the default rules plus o.
func New(o Options) *Redactor {
	r := &Redactor{headers: map[string]bool{}, keys: map[string]bool{},
		allowHeaders: map[string]bool{}, allowKeys: map[string]bool{}, allowEnv: map[string]bool{}}
	for _, h := range append(AllowedHeaders(), o.AllowHeaders...) {
		h = strings.ToLower(strings.TrimSpace(h))
		if p, ok := strings.CutSuffix(h, "*"); ok {
			r.allowPrefix = append(r.allowPrefix, p)
		} else {
			r.allowHeaders[h] = true
		}
	}
	for _, k := range append(AllowedQueryKeys(), o.AllowQueryKeys...) {
		r.allowKeys[strings.ToLower(strings.TrimSpace(k))] = true
	}
	for _, k := range o.AllowEnv {
		r.allowEnv[strings.ToUpper(strings.TrimSpace(k))] = true
	}
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

// AllowedHeader reports whether a request header's value is recorded: the
// header is in [AllowedHeaders] or the options' AllowHeaders and the rules
// do not call it sensitive ([Redactor.SensitiveHeader]).
func (r *Redactor) AllowedHeader(name string) bool {
	r = r.rules()
	n := strings.ToLower(strings.TrimSpace(name))
	if r.SensitiveHeader(n) {
		return false
	}
	if r.allowHeaders[n] {
		return true
	}
	for _, p := range r.allowPrefix {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// Header returns the value of request header name as drill may record it:
// value with the text rules when the header is allowed
// ([Redactor.AllowedHeader]) or value is written only as drill references
// ([OnlyReferences]), else [Redacted].
func (r *Redactor) Header(name, value string) string {
	if value == "" {
		return ""
	}
	if r.AllowedHeader(name) || OnlyReferences(value) {
		return r.Text(value)
	}
	return Redacted
}

// Query returns the value of URL query key as drill may record it (value
// and key as written, percent-encoded or not): value when it is written
// only as drill references; else [Redacted] when the key is sensitive
// ([Redactor.SensitiveKey]) and key=value is no count or outcome
// ([CountOrOutcome]); else value when the key is allowed
// ([AllowedQueryKeys], the options' AllowQueryKeys) or the value is
// harmless ([Harmless]); else [Redacted].
func (r *Redactor) Query(key, value string) string {
	if value == "" || value == Redacted {
		return value
	}
	k, v := unescape(key), unescape(value)
	switch {
	case OnlyReferences(v):
		return value
	case r.SensitiveKey(k) && !CountOrOutcome(k, v):
		return Redacted
	case r.rules().allowKeys[strings.ToLower(strings.TrimSpace(k))], Harmless(v):
		return value
	}
	return Redacted
}

// pathBase turns a request path into a URL the URL rules read.
const pathBase = "http://h"

// Path returns a request path with its query ("/ready?tenant=x") as drill
// may record it: its query values as [Redactor.Query] keeps them, and the
// text rules. A string not starting with "/" gets the text rules alone.
func (r *Redactor) Path(p string) string {
	if !strings.HasPrefix(p, "/") {
		return r.Text(p)
	}
	return strings.TrimPrefix(r.Text(pathBase+p), pathBase)
}

// PathSecrets returns the values [Redactor.SecretsIn] finds in a request
// path's query ("/ready?tenant=x").
func (r *Redactor) PathSecrets(p string) []string {
	if !strings.HasPrefix(p, "/") {
		return r.SecretsIn(p)
	}
	return r.SecretsIn(pathBase + p)
}

// unescape returns s with its percent-encoding undone, or s when it has
// none or a bad one.
func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// Env returns the value of environment variable name as drill may record
// it: value with the text rules when it is written only as drill
// references ([OnlyReferences]); else [Redacted] for a sensitive name
// ([SensitiveEnvName]); else value with the text rules when the name is
// in the options' AllowEnv or the value is harmless ([Harmless]); else
// [Redacted].
func (r *Redactor) Env(name, value string) string {
	if value == "" {
		return ""
	}
	switch {
	case OnlyReferences(value):
		return r.Text(value)
	case SensitiveEnvName(name):
		return Redacted
	case r.AllowedEnv(name), Harmless(value):
		return r.Text(value)
	}
	return Redacted
}

// AllowedEnv reports whether the options' AllowEnv names environment
// variable name and [SensitiveEnvName] does not match it: its value is
// recorded whatever it holds (with the text rules).
func (r *Redactor) AllowedEnv(name string) bool {
	return r.rules().allowEnv[strings.ToUpper(strings.TrimSpace(name))] && !SensitiveEnvName(name)
}

// SecretEnvValue reports whether the value of environment variable name
// is a secret to replace wherever it appears in free text (a known value
// of the run): [Redactor.Env] redacts it, and either the name is
// sensitive ([SensitiveEnvName]) or the value is at least
// [MinUnnamedValueLen] bytes long. A value with ${...} references is not
// (its expansion is another value).
func (r *Redactor) SecretEnvValue(name, value string) bool {
	if value == "" || strings.Contains(value, "${") || r.Env(name, value) != Redacted {
		return false
	}
	return SensitiveEnvName(name) || len(value) >= MinUnnamedValueLen
}

// Harmless reports whether value carries no secret by its form alone: a
// number of fewer than 12 digits (an optional sign, an optional decimal
// point), a Go duration with units (250ms, 1h30m) or a boolean (true,
// false, yes, no, on, off; any case).
func Harmless(value string) bool {
	v := strings.TrimSpace(value)
	if v == "" {
		return false
	}
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off":
		return true
	}
	if smallNumber(v) {
		return true
	}
	if strings.IndexFunc(v, isLetter) >= 0 {
		if _, err := time.ParseDuration(v); err == nil {
			return true
		}
	}
	return false
}

// smallNumber reports whether v is a number of 1 to 11 digits with an
// optional sign and an optional decimal point.
func smallNumber(v string) bool {
	v = strings.TrimLeft(v, "+-")
	digits, dots := 0, 0
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && digits < 12 && dots <= 1
}

func isLetter(c rune) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// referenceRE matches one of drill's references: ${env.NAME},
// ${proxies.…}, ${dependencies.…}, ${services.…} or ${run.id}.
var referenceRE = regexp.MustCompile(`\$\{(?:env|proxies|dependencies|services|run)\.[A-Za-z0-9_.-]+\}`)

// leadRE matches what may precede the references of a value written only
// as references: an HTTP auth scheme and a space ("Bearer "), or a URL
// scheme with an optional userinfo (which the text rules redact).
var leadRE = regexp.MustCompile(`^(?i:(?:bearer|basic|digest|token|apikey) +|[a-z][a-z0-9+.-]*://(?:[^/?#@\s]*@)?)`)

// OnlyReferences reports whether value is written only as drill's
// references (${env.NAME}, ${proxies.…}, ${dependencies.…}, ${services.…},
// ${run.id}), with nothing between or around them but punctuation, a
// leading HTTP auth scheme ("Bearer ${env.TOKEN}") or a leading URL scheme
// ("http://${services.app.addr}/"): its text holds no secret, only where
// the value comes from. A value with "$$" (a literal "$") is not.
func OnlyReferences(value string) bool {
	if strings.Contains(value, "$$") || !referenceRE.MatchString(value) {
		return false
	}
	rest := referenceRE.ReplaceAllString(value, " ")
	rest = leadRE.ReplaceAllString(strings.TrimLeft(rest, " \t"), "")
	return strings.IndexFunc(rest, func(c rune) bool {
		return isLetter(c) || c >= '0' && c <= '9' || c > 127
	}) < 0
}

// outcomeWords are the last words of keys that name a count or an
// outcome, not a credential.
var outcomeWords = []string{"failed", "successful", "removed", "total", "count"}

// CountOrOutcome reports whether key=value is a count or an outcome rather
// than a credential, though the key may contain a sensitive word: the
// key's last word (after _ - . or a lower-to-upper case change) is
// failed, successful, removed, total or count, and value is a boolean
// (true or false, any case) or a whole number of fewer than 12 digits.
// "authentication_failed=true" and "sessions_removed=3" are; "auth_token=1"
// and "session_count=abc" are not.
func CountOrOutcome(key, value string) bool {
	v := strings.TrimSpace(value)
	switch {
	case strings.EqualFold(v, "true"), strings.EqualFold(v, "false"):
	case v != "" && len(v) < 12 && strings.Trim(v, "0123456789") == "":
	default:
		return false
	}
	k := strings.TrimSpace(key)
	lower := strings.ToLower(k)
	for _, w := range outcomeWords {
		if !strings.HasSuffix(lower, w) || len(k) == len(w) {
			continue
		}
		before := k[len(k)-len(w)-1]
		first := k[len(k)-len(w)]
		if strings.IndexByte("_-.", before) >= 0 || (first >= 'A' && first <= 'Z' && before >= 'a' && before <= 'z') {
			return true
		}
	}
	return false
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

// SecretsIn returns the values the text rules would redact in s, in
// order: URL passwords, lone URL users of at least [MinUnnamedValueLen]
// bytes, URL query values redacted by [Redactor.Query] (those of keys the
// rules do not call sensitive only when at least [MinUnnamedValueLen]
// bytes), and the values of sensitive key=value pairs (key=value DSNs).
func (r *Redactor) SecretsIn(s string) []string {
	r = r.rules()
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	unnamed := func(v string) {
		if len(v) >= MinUnnamedValueLen {
			add(v)
		}
	}
	for _, u := range findURLs(s) {
		if u.user != "" && u.user != Redacted {
			if user, pass, ok := strings.Cut(u.user, ":"); ok {
				add(pass)
				unnamed(user)
			} else {
				unnamed(user)
			}
		}
		for _, q := range u.query {
			k, v := s[q.key[0]:q.key[1]], s[q.val[0]:q.val[1]]
			if r.Query(k, v) != Redacted || v == Redacted {
				continue
			}
			if r.SensitiveKey(unescape(k)) {
				add(v)
			} else {
				unnamed(v)
			}
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
			if v := s[from:to]; !CountOrOutcome(s[pos+loc[2]:pos+loc[3]], v) && !OnlyReferences(v) {
				add(s[from:to])
			}
			end = max(end, to)
		}
		pos = end
	}
	return out
}

// urlStartRE matches where a URL starts in free text: a scheme and "://",
// or a drill reference directly followed by a path or a query
// ("${dependencies.stub.url}/x?a=b").
var urlStartRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://|\$\{[A-Za-z0-9_.-]+\}[/?]`)

// urlStop are the bytes that end a URL in free text.
const urlStop = " \t\r\n\"'<>`\\"

// foundURL is a URL in free text, as byte spans of the text: its userinfo
// (empty span when none) and its query pairs.
type foundURL struct {
	userAt [2]int
	user   string
	query  []queryPair
}

// queryPair is one key=value of a query, as byte spans.
type queryPair struct{ key, val [2]int }

// findURLs returns the URLs in s, in order.
func findURLs(s string) []foundURL {
	if !strings.Contains(s, "://") && !strings.Contains(s, "${") {
		return nil
	}
	var out []foundURL
	for pos := 0; pos < len(s); {
		loc := urlStartRE.FindStringIndex(s[pos:])
		if loc == nil {
			break
		}
		start, body := pos+loc[0], pos+loc[1]
		end := body + tokenLen(s[body:], urlStop)
		var u foundURL
		if strings.HasSuffix(s[start:body], "://") {
			auth := body + tokenLen(s[body:end], "/?#")
			if at := strings.LastIndexByte(s[body:auth], '@'); at >= 0 {
				u.userAt = [2]int{body, body + at}
				u.user = s[body : body+at]
			}
		} else {
			body-- // the '/' or '?' after the reference
		}
		if q := strings.IndexByte(s[body:end], '?'); q >= 0 {
			qs := body + q + 1
			qe := qs + tokenLen(s[qs:end], "#")
			for i := qs; i < qe; {
				j := i + tokenLen(s[i:qe], "&")
				if eq := strings.IndexByte(s[i:j], '='); eq >= 0 {
					u.query = append(u.query, queryPair{key: [2]int{i, i + eq}, val: [2]int{i + eq + 1, j}})
				}
				i = j + 1
			}
		}
		out = append(out, u)
		pos = max(end, start+1)
	}
	return out
}

// redactURLs returns s with the userinfo of every URL and the query values
// [Redactor.Query] redacts replaced by [Redacted].
func (r *Redactor) redactURLs(s string) string {
	urls := findURLs(s)
	if len(urls) == 0 {
		return s
	}
	type cut struct{ from, to int }
	var cuts []cut
	for _, u := range urls {
		if u.user != "" && u.user != Redacted {
			cuts = append(cuts, cut{u.userAt[0], u.userAt[1]})
		}
		for _, q := range u.query {
			if v := s[q.val[0]:q.val[1]]; r.Query(s[q.key[0]:q.key[1]], v) == Redacted && v != Redacted {
				cuts = append(cuts, cut{q.val[0], q.val[1]})
			}
		}
	}
	if len(cuts) == 0 {
		return s
	}
	var b strings.Builder
	pos := 0
	for _, c := range cuts {
		b.WriteString(s[pos:c.from])
		b.WriteString(Redacted)
		pos = c.to
	}
	b.WriteString(s[pos:])
	return b.String()
}

// nameRE matches a name followed by ":" or "=" (a header line, a JSON or
// Go map key, a query or key=value pair): 1 the name, 2 the separator.
var nameRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_-]*)"?[ \t]*([:=])[ \t]*`)

// authSchemes are HTTP auth schemes that precede a credential after
// "Authorization:".
var authSchemes = []string{"bearer", "basic", "digest", "token", "negotiate", "ntlm", "apikey"}

// Text returns s as drill may write it: known secret values, URL
// userinfo, URL query values [Redactor.Query] redacts, the values of sensitive headers written "Name: value",
// "Name=value", `"Name":"value"` or "Name:[value]", and the values of
// sensitive key=value keys (but counts and outcomes, [CountOrOutcome],
// and values written only as drill references) are replaced by
// [Redacted]. "Name:"
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
	s = r.redactURLs(s)
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
		var from, to int
		if secret {
			from, to = valueSpan(s, end, sep)
			secret = !CountOrOutcome(name, s[from:to]) && !OnlyReferences(s[from:to])
		}
		if !secret {
			b.WriteString(s[pos:end])
			pos = end
			continue
		}
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
	j += tokenLen(s[j:], " \t\r\n\",;]}")
	// "Cookie: a=b; c=d": further pairs belong to the value.
	for j < len(s) && s[j] == ';' {
		k := j + 1
		for k < len(s) && s[k] == ' ' {
			k++
		}
		n := tokenLen(s[k:], " \t\r\n\",;]}")
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
