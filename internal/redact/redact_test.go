package redact_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/redact"
)

func TestText(t *testing.T) {
	r := redact.New(redact.Options{Headers: []string{"X-Tenant"}, QueryKeys: []string{"ticket"}, Values: []string{"k3y-from-env"}})
	for _, tc := range []struct{ in, want string }{
		{"no secrets here", "no secrets here"},
		{"Authorization: Bearer abc.def", "Authorization: REDACTED"},
		{"authorization=xyz rest", "authorization=REDACTED rest"},
		{`{"Authorization":"Basic Zm9v","a":1}`, `{"Authorization":"REDACTED","a":1}`},
		{"map[Authorization:[Bearer tok]]", "map[Authorization:[REDACTED]]"},
		{"Proxy-Authorization: Basic Zm9v", "Proxy-Authorization: REDACTED"},
		{"cookie: a=b; c=d", "cookie: REDACTED"},
		{"Set-Cookie: sid=1; Path=/", "Set-Cookie: REDACTED"},
		{"X-Api-Key: k1 next", "X-Api-Key: REDACTED next"},
		{"x-auth-token:abc", "x-auth-token:REDACTED"},
		{"X-Tenant: acme", "X-Tenant: REDACTED"},
		{"X-Request-Id: 42", "X-Request-Id: 42"},
		{"http://user:pa55@host:80/p", "http://REDACTED@host:80/p"},
		{"postgres://drill:pa55@127.0.0.1:5432/db?sslmode=disable", "postgres://REDACTED@127.0.0.1:5432/db?sslmode=disable"},
		{"postgres://drill@127.0.0.1/db", "postgres://REDACTED@127.0.0.1/db"},
		{"GET http://h/x?token=t0k&page=2", "GET http://h/x?token=REDACTED&page=2"},
		{"http://h/x?a=1&API_KEY=abc#frag", "http://h/x?a=1&API_KEY=REDACTED#frag"},
		{"http://h/x?sig=abc&key=def&monkey=3", "http://h/x?sig=REDACTED&key=REDACTED&monkey=3"},
		{"http://h/x?ticket=abc", "http://h/x?ticket=REDACTED"},
		{"host=db user=app password=s3cret dbname=x", "host=db user=app password=REDACTED dbname=x"},
		{"host=db password='a b c' dbname=x", "host=db password='REDACTED' dbname=x"},
		{"Server=db;Password=s3cret;Database=x", "Server=db;Password=REDACTED;Database=x"},
		{"GITHUB_PAT=ghp_abc PATH=/bin", "GITHUB_PAT=REDACTED PATH=/bin"},
		{`"password": "hunter2"`, `"password": "REDACTED"`},
		{"value k3y-from-env leaked", "value REDACTED leaked"},
		{"escaped k3y-from-env", "escaped REDACTED"},
		{"streams[0].rate: rate must be above 0", "streams[0].rate: rate must be above 0"},
		{"fault:pg-pause recovery:pg-pause", "fault:pg-pause recovery:pg-pause"},
		{"op <= 5, a == b", "op <= 5, a == b"},
		{"s.yaml:7: streams[0].headers.Authorization: value must not be empty", "s.yaml:7: streams[0].headers.Authorization: value must not be empty"},
		{"s.yaml:5: streams[0].basicAuth: missing required key", "s.yaml:5: streams[0].basicAuth: missing required key"},
		{"req.Header Authorization: Bearer x", "req.Header Authorization: REDACTED"},
		// A dotted name is a header line unless it ends a scenario field
		// path (rooted at an indexed segment such as streams[0]).
		{"req.Header.Authorization: Bearer x", "req.Header.Authorization: REDACTED"},
		{"level=info request.headers.authorization: Bearer abc.def", "level=info request.headers.authorization: REDACTED"},
		{`{"req.headers.cookie":"sid=abc"}`, `{"req.headers.cookie":"REDACTED"}`},
		{"x.streams[0].headers.X-Api-Key: k1", "x.streams[0].headers.X-Api-Key: REDACTED"},
		{"s.yaml: streams[0].targets[1].headers.X-Api-Key: unknown reference", "s.yaml: streams[0].targets[1].headers.X-Api-Key: unknown reference"},
	} {
		got := r.Text(tc.in)
		if got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := r.Text(got); again != got {
			t.Errorf("Text is not idempotent on %q: %q", got, again)
		}
	}
	// A nil Redactor applies the default rules.
	var none *redact.Redactor
	if got := none.Text("Cookie: a=b"); got != "Cookie: REDACTED" {
		t.Errorf("nil Redactor: %q", got)
	}
}

func TestSensitiveNames(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_PAT": true, "DB_PASSWORD": true, "AWS_SECRET_ACCESS_KEY": true, "API_TOKEN": true,
		"DB_PASS": true, "SIGNING_KEY": true, "gcp_credentials": true, "PRIVATE_KEY_FILE": true,
		"PATH": false, "KEYCLOAK_URL": false, "MONKEY": false, "DATABASE_URL": false, "PWD": false, "LOG_LEVEL": false,
	} {
		if got := redact.SensitiveEnvName(name); got != want {
			t.Errorf("SensitiveEnvName(%q) = %v, want %v", name, got, want)
		}
	}
	r := redact.New(redact.Options{Headers: []string{"x-tenant-id"}})
	for _, h := range append(redact.DefaultHeaders(), "X-TENANT-ID", "X-Session-Id", "X-My-Secret", "authorization") {
		if !r.SensitiveHeader(h) {
			t.Errorf("header %s is not sensitive", h)
		}
	}
	for _, h := range []string{"Content-Type", "Accept", "X-Request-Id", "User-Agent"} {
		if r.SensitiveHeader(h) {
			t.Errorf("header %s is sensitive", h)
		}
	}
}

func TestBodyEnvArgs(t *testing.T) {
	var r *redact.Redactor
	b := r.Body(`{"password":"hunter2"}`)
	if strings.Contains(b, "hunter2") || !strings.HasPrefix(b, "REDACTED (22 bytes, sha256:") || len(b) != len("REDACTED (22 bytes, sha256:)")+16 {
		t.Errorf("Body = %q", b)
	}
	if r.Body(b) != b || r.Body("") != "" {
		t.Error("Body is not idempotent or changed an empty body")
	}
	// An allowed name's value still gets the text rules.
	allowed := redact.New(redact.Options{AllowEnv: []string{"DATABASE_URL", "PG_DSN", "log_level", "GITHUB_PAT"}})
	for _, tc := range []struct{ name, value, want string }{
		{"GITHUB_PAT", "ghp_x", "REDACTED"},
		{"DATABASE_URL", "postgres://app:pw1234@db/x", "postgres://REDACTED@db/x"},
		{"PG_DSN", "host=db password=pw1234", "host=db password=REDACTED"},
		{"LOG_LEVEL", "info", "info"},
	} {
		if got := allowed.Env(tc.name, tc.value); got != tc.want {
			t.Errorf("Env(%s, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
	got := strings.Join(r.Args([]string{"app", "--password", "pw1", "--db-token=tk", "-v", "--name", "x"}), " ")
	if want := "app --password REDACTED --db-token=REDACTED -v --name x"; got != want {
		t.Errorf("Args = %q, want %q", got, want)
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	r := redact.New(redact.Options{Values: []string{"from-env-123"}})
	log := slog.New(redact.Handler(slog.NewJSONHandler(&buf, nil), r)).With("dsn", "postgres://u:pw99@h/db")
	log.Info("got from-env-123", "err", errors.New("GET http://h/?token=t0k1: refused"), "token", "abc",
		slog.Group("g", "cookie", "c=1"), "n", 3)
	out := buf.String()
	for _, leak := range []string{"from-env-123", "pw99", "t0k1", `"abc"`, "c=1"} {
		if strings.Contains(out, leak) {
			t.Errorf("log line holds %q: %s", leak, out)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["n"] != 3.0 {
		t.Errorf("log line %s: %v (numbers must stay numbers)", out, err)
	}
}

func TestError(t *testing.T) {
	base := exitcode.Wrap(exitcode.CouldNotRun, errors.New("dial http://u:secretpw@h failed"))
	err := redact.Error(base, nil)
	if strings.Contains(err.Error(), "secretpw") || exitcode.Code(err) != exitcode.CouldNotRun || !errors.Is(err, base) {
		t.Errorf("Error = %v (code %d)", err, exitcode.Code(err))
	}
	if redact.Error(nil, nil) != nil {
		t.Error("nil error became non-nil")
	}
}

func TestLineWriter(t *testing.T) {
	var buf bytes.Buffer
	w := redact.NewLineWriter(&buf, redact.New(redact.Options{Values: []string{"split-secret"}}))
	for _, p := range []string{"one spl", "it-secret two\nCookie: a", "=b\nlast spli", "t-secret"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "one REDACTED two\nCookie: REDACTED\nlast REDACTED"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestHeaderAllowList: a request header's value is recorded only when the
// header is known to carry no secret (the default list or the options'
// AllowHeaders) and no sensitive-name rule calls it sensitive.
func TestHeaderAllowList(t *testing.T) {
	r := redact.New(redact.Options{AllowHeaders: []string{"x-tenant-region", "X-Build-*", "X-Auth-Mode"}, Headers: []string{"X-Request-Sig"}})
	for _, tc := range []struct{ name, value, want string }{
		{"Accept", "text/plain", "text/plain"},
		{"content-type", "application/json", "application/json"},
		{"User-Agent", "drill/1", "drill/1"},
		{"Cache-Control", "no-cache", "no-cache"},
		{"X-Request-Id", "abc-123", "abc-123"},
		{"X-Request-Start", "t=1700000000", "t=1700000000"},
		// Names no list has heard of.
		{"Ocp-Apim-Subscription-Key", "0123456789abcdef", "REDACTED"},
		{"X-Tenant-Seal", "sealed-value-1", "REDACTED"},
		{"X-Anything", "42", "REDACTED"},
		// Allowed by the scenario.
		{"X-Tenant-Region", "eu-west", "eu-west"},
		{"x-build-sha", "9f8e7d", "9f8e7d"},
		// Sensitive names stay redacted, allowed or not.
		{"X-Auth-Mode", "oauth", "REDACTED"},
		{"X-Request-Sig", "abc", "REDACTED"},
		{"X-Request-Token", "abc", "REDACTED"},
		{"Authorization", "Basic Zm9v", "REDACTED"},
		// An allowed value still gets the text rules.
		{"Accept", "http://u:pw@h/x", "http://REDACTED@h/x"},
		{"X-Tenant-Seal", "", ""},
	} {
		if got := r.Header(tc.name, tc.value); got != tc.want {
			t.Errorf("Header(%s, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
	var none *redact.Redactor
	if none.AllowedHeader("X-Tenant-Region") || !none.AllowedHeader("accept-encoding") {
		t.Error("a nil Redactor does not apply the default allow list alone")
	}
}

// TestURLUserinfo: all of a URL's userinfo, a lone token as well as
// user:password, is replaced in free text, and a lone token long enough to
// be told apart from ordinary words becomes a known value.
func TestURLUserinfo(t *testing.T) {
	var r *redact.Redactor
	for _, tc := range []struct{ in, want string }{
		{"https://abc123token@o1.ingest.example.com/42", "https://REDACTED@o1.ingest.example.com/42"},
		{"remote https://ghp_abcdef@github.com/org/repo.git fetched", "remote https://REDACTED@github.com/org/repo.git fetched"},
		{"ssh://git@host:22/repo", "ssh://REDACTED@host:22/repo"},
		{"http://user:pa55@host/p", "http://REDACTED@host/p"},
		{"http://u:p@ss@host/p", "http://REDACTED@host/p"},
		{`{"dsn":"https://k3y@sentry.example/1","n":1}`, `{"dsn":"https://REDACTED@sentry.example/1","n":1}`},
		{"Get \"http://tok@127.0.0.1:8080/x\": dial tcp", "Get \"http://REDACTED@127.0.0.1:8080/x\": dial tcp"},
		{"http://${env.USER}@${services.app.addr}/", "http://REDACTED@${services.app.addr}/"},
		{"http://host/path@v2 and mail me@example.com", "http://host/path@v2 and mail me@example.com"},
		{"git@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"http://REDACTED@host/", "http://REDACTED@host/"},
	} {
		got := r.Text(tc.in)
		if got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := r.Text(got); again != got {
			t.Errorf("Text is not idempotent on %q: %q", got, again)
		}
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"https://abc123token@host/path", []string{"abc123token"}},
		{"postgres://drill@127.0.0.1/db", nil},
		{"http://user:pa55word@h/", []string{"pa55word"}},
	} {
		if got := r.SecretsIn(tc.in); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("SecretsIn(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEnvAllowList: an env value is recorded only when it is written as
// drill references, harmless by its form or allowed by name; a sensitive
// name stays redacted whatever its literal value.
func TestEnvAllowList(t *testing.T) {
	r := redact.New(redact.Options{AllowEnv: []string{"log_level", "GITHUB_TOKEN", "SERVICE_URL"}})
	for _, tc := range []struct{ name, value, want string }{
		{"TAX_API_URL", "http://${proxies.tax-api.addr}", "http://${proxies.tax-api.addr}"},
		{"PG_ADDR", "${dependencies.pg.host}:${dependencies.pg.port}", "${dependencies.pg.host}:${dependencies.pg.port}"},
		{"RUN", "${run.id}", "${run.id}"},
		{"UPSTREAM", "${services.app.url}/", "${services.app.url}/"},
		{"WORKERS", "16", "16"},
		{"RATIO", "-0.25", "-0.25"},
		{"BIG", "12345678901", "12345678901"},
		{"TIMEOUT", "1m30s", "1m30s"},
		{"DEBUG", "True", "True"},
		{"ENABLED", "off", "off"},
		{"LOG_LEVEL", "info", "info"},
		{"SERVICE_URL", "http://u:pw@h/x?token=t0k", "http://REDACTED@h/x?token=REDACTED"},
		// Names no list has heard of, values that are no number,
		// duration or boolean.
		{"TENANT_SEAL", "s3al-v4lue", "REDACTED"},
		{"SENTRY_DSN", "https://abc123token@o1.ingest.example.com/42", "REDACTED"},
		{"MODE", "production", "REDACTED"},
		{"LONG_NUMBER", "123456789012", "REDACTED"},
		{"DATABASE_URL", "postgres://drill@${proxies.postgres.addr}/drill?sslmode=disable", "REDACTED"},
		{"EMBEDDED", "abc${run.id}", "REDACTED"},
		{"ESCAPED", "$${env.X}", "REDACTED"},
		// Sensitive names: redacted whatever the literal value looks
		// like, allowed or not.
		{"DB_PASSWORD", "12345", "REDACTED"},
		{"API_TOKEN", "true", "REDACTED"},
		{"GITHUB_TOKEN", "ghp_abc", "REDACTED"},
		{"SESSION_KEY", "30s", "REDACTED"},
		{"EMPTY", "", ""},
	} {
		if got := r.Env(tc.name, tc.value); got != tc.want {
			t.Errorf("Env(%s, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
	// Which redacted values are also replaced wherever they appear.
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{"DB_PASS", "pw1", true},
		{"TENANT_SEAL", "s3al-v4lue", true},
		{"MODE", "info", false},
		{"LOG_LEVEL", "sixteen-chars-xx", false},
		{"WORKERS", "123456789", false},
		{"DB_PASSWORD", "${env.DB_PASSWORD}", false},
		{"DATABASE_URL", "postgres://drill@${proxies.pg.addr}/drill", false},
	} {
		if got := r.SecretEnvValue(tc.name, tc.value); got != tc.want {
			t.Errorf("SecretEnvValue(%s, %q) = %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}

// TestQueryAllowList: a URL's query value is recorded only for a harmless
// key, a harmless value or drill references; a sensitive key stays
// redacted. Free text follows the same rule in every URL.
func TestQueryAllowList(t *testing.T) {
	r := redact.New(redact.Options{AllowQueryKeys: []string{"tenant"}, QueryKeys: []string{"ticket"}})
	for _, tc := range []struct{ key, value, want string }{
		{"page", "2", "2"},
		{"sort", "created_at", "created_at"},
		{"sslmode", "disable", "disable"},
		{"Tenant", "acme", "acme"},
		{"since", "15m", "15m"},
		{"note", "${env.NOTE}", "${env.NOTE}"},
		{"subscription-key", "0123abcd", "REDACTED"},
		{"x_seal", "abc", "REDACTED"},
		{"ticket", "42", "REDACTED"},
		{"token", "true", "REDACTED"},
		{"token", "${env.TOKEN}", "${env.TOKEN}"},
		{"q%5Bseal%5D", "a%20b", "REDACTED"},
	} {
		if got := r.Query(tc.key, tc.value); got != tc.want {
			t.Errorf("Query(%s, %q) = %q, want %q", tc.key, tc.value, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"GET http://h/x?subscription-key=0123abcd&page=2", "GET http://h/x?subscription-key=REDACTED&page=2"},
		{"http://h/x?seal=abc&flag&n=7#frag=x", "http://h/x?seal=REDACTED&flag&n=7#frag=x"},
		{"${dependencies.stub.url}/x?tenant=acme&seal=s3al", "${dependencies.stub.url}/x?tenant=acme&seal=REDACTED"},
		{"postgres://h/db?sslmode=disable&options=-c%20x", "postgres://h/db?sslmode=disable&options=REDACTED"},
		{`{"url":"http://h/?x=abc","y":"z"}`, `{"url":"http://h/?x=REDACTED","y":"z"}`},
		{"no url ?x=abc here", "no url ?x=abc here"},
	} {
		got := r.Text(tc.in)
		if got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := r.Text(got); again != got {
			t.Errorf("Text is not idempotent on %q: %q", got, again)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"/ready?seal=abc&page=2", "/ready?seal=REDACTED&page=2"},
		{"/healthz", "/healthz"},
		{"/x?token=t0k", "/x?token=REDACTED"},
		{"relative?seal=abc", "relative?seal=abc"},
	} {
		if got := r.Path(tc.in); got != tc.want {
			t.Errorf("Path(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := r.PathSecrets("/ready?seal=longsealvalue"); strings.Join(got, "|") != "longsealvalue" {
		t.Errorf("PathSecrets = %q", got)
	}
	got := r.SecretsIn("http://h/x?seal=longsealvalue&short=abc&token=t0k&page=2")
	if want := "longsealvalue|t0k"; strings.Join(got, "|") != want {
		t.Errorf("SecretsIn = %q, want %s", got, want)
	}
}

// TestCountsAndOutcomes: replica log lines keep counts and outcomes whose
// keys merely contain a sensitive word; a key that names a secret stays
// redacted whatever its value.
func TestCountsAndOutcomes(t *testing.T) {
	var r *redact.Redactor
	for _, tc := range []struct{ in, want string }{
		{"level=warn authentication_failed=true user=bob", "level=warn authentication_failed=true user=bob"},
		{"auth_successful=false sessions_removed=3 session_total=120", "auth_successful=false sessions_removed=3 session_total=120"},
		{"token_count=7 authFailed=TRUE", "token_count=7 authFailed=TRUE"},
		{`{"auth_failures_total":3,"session_count":12}`, `{"auth_failures_total":3,"session_count":12}`},
		{"X-Auth-Count: 4", "X-Auth-Count: 4"},
		// Not a boolean or a whole number: redacted.
		{"authentication_failed=bob", "authentication_failed=REDACTED"},
		{"session_count=abc", "session_count=REDACTED"},
		{"token_total=123456789012", "token_total=REDACTED"},
		// Keys that name a secret: redacted whatever the value.
		{"session=1 auth_token=true password=0", "session=REDACTED auth_token=REDACTED password=REDACTED"},
		{"authcount=3", "authcount=REDACTED"},
		{`{"auth":true}`, `{"auth":REDACTED}`},
	} {
		got := r.Text(tc.in)
		if got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		key, value string
		want       bool
	}{
		{"authentication_failed", "true", true},
		{"login-successful", "false", true},
		{"cookies.removed", "0", true},
		{"sessionTotal", "5", true},
		{"count", "5", false},
		{"discount", "5", false},
		{"auth_failed", "1.5", false},
		{"auth_failed", "-1", false},
		{"session_count", "", false},
	} {
		if got := redact.CountOrOutcome(tc.key, tc.value); got != tc.want {
			t.Errorf("CountOrOutcome(%q, %q) = %v, want %v", tc.key, tc.value, got, tc.want)
		}
	}
	// drill's own logs follow the same rule.
	var buf bytes.Buffer
	log := slog.New(redact.Handler(slog.NewTextHandler(&buf, nil), nil))
	log.Info("pool", "session_count", 3, "auth_failed", true, "session", 4, "token", "t0k")
	out := buf.String()
	for _, want := range []string{"session_count=3", "auth_failed=true", "session=REDACTED", "token=REDACTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("log line %q lacks %s", out, want)
		}
	}
}

// TestReferencesRecordedAsWritten: a value written only as drill
// references holds no secret and is recorded as written in every kind of
// field, a sensitive one included; a literal beside the references is not.
func TestReferencesRecordedAsWritten(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"${env.API_TOKEN}", true},
		{"Bearer ${env.API_TOKEN}", true},
		{"basic ${env.USER}:${env.PASS}", true},
		{"http://${proxies.pg.addr}", true},
		{"http://u@${services.app.addr}/", true},
		{"${dependencies.pg.host}:${dependencies.pg.port}", true},
		{"${run.id}", true},
		{"Bearer abc${env.X}", false},
		{"${env.X}-suffix", false},
		{"${env.X}7", false},
		{"$${env.X}", false},
		{"${unknown.x}", false},
		{"plain", false},
		{"", false},
	} {
		if got := redact.OnlyReferences(tc.value); got != tc.want {
			t.Errorf("OnlyReferences(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
	var r *redact.Redactor
	for _, tc := range []struct{ what, got, want string }{
		{"sensitive header", r.Header("Authorization", "Bearer ${env.API_TOKEN}"), "Bearer ${env.API_TOKEN}"},
		{"unknown header", r.Header("X-Tenant-Seal", "${env.SEAL}"), "${env.SEAL}"},
		{"literal header", r.Header("Authorization", "Bearer abc${env.API_TOKEN}"), "REDACTED"},
		{"sensitive env", r.Env("DB_PASSWORD", "${env.DB_PASSWORD}"), "${env.DB_PASSWORD}"},
		{"unknown env", r.Env("TENANT_SEAL", "${env.SEAL}"), "${env.SEAL}"},
		{"sensitive query", r.Query("token", "${env.TOKEN}"), "${env.TOKEN}"},
		{"userinfo around a reference", r.Env("UPSTREAM", "http://tok@${services.app.addr}/"), "http://REDACTED@${services.app.addr}/"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
}
