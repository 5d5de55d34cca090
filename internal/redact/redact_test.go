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
		{"http://user:pa55@host:80/p", "http://user:REDACTED@host:80/p"},
		{"postgres://drill:pa55@127.0.0.1:5432/db?sslmode=disable", "postgres://drill:REDACTED@127.0.0.1:5432/db?sslmode=disable"},
		{"postgres://drill@127.0.0.1/db", "postgres://drill@127.0.0.1/db"},
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
	for _, tc := range []struct{ name, value, want string }{
		{"GITHUB_PAT", "ghp_x", "REDACTED"},
		{"DATABASE_URL", "postgres://app:pw1234@db/x", "postgres://app:REDACTED@db/x"},
		{"PG_DSN", "host=db password=pw1234", "host=db password=REDACTED"},
		{"LOG_LEVEL", "info", "info"},
	} {
		if got := r.Env(tc.name, tc.value); got != tc.want {
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
