package scenario

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/redact"
)

// TestRedactedScenario plants a canary in every place the rules cover and checks
// that the redacted copy holds none while the original is untouched and
// what judging reads is unchanged.
func TestRedactedScenario(t *testing.T) {
	const canary = "CANARY-9f8e7d"
	src := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata: {name: secrets}
timeline: {duration: 5s}
redact: {headers: [X-Tenant], queryKeys: [ticket], allowEnv: [LOG_LEVEL, DATABASE_URL], allowHeaders: [X-Region]}
services:
  - name: app
    command: [app, --password, ` + canary + `, --token=` + canary + `]
    env:
      GITHUB_PAT: ` + canary + `
      DATABASE_URL: postgres://app:` + canary + `@127.0.0.1:1/db
      PG_DSN: host=127.0.0.1 password=` + canary + ` dbname=db
      LOG_LEVEL: info
      TENANT_SEAL: ` + canary + `
      SENTRY_DSN: https://` + canary + `@o1.ingest.example.com/42
      WORKERS: "8"
    setup:
      command: [migrate, --password, ` + canary + `]
      env:
        SETUP_SEAL: ` + canary + `
        MIGRATE_TIMEOUT: 2m
    probes:
      readinessProbe:
        httpGet: {path: "/ready?seal=` + canary + `&page=1", httpHeaders: [{name: X-Api-Key, value: ` + canary + `}]}
streams:
  - name: s
    rate: 1/s
    basicAuth: {username: u, password: ` + canary + `}
    targets:
      - url: http://u:` + canary + `@127.0.0.1:1/x?token=` + canary + `&ticket=` + canary + `&x_seal=` + canary + `&page=2
        method: POST
        headers: {Cookie: "sid=` + canary + `", X-Auth-Token: ` + canary + `, X-Tenant: ` + canary + `, Accept: text/plain, X-Tenant-Seal: ` + canary + `, X-Region: eu-west}
      - url: https://` + canary + `@127.0.0.1:1/y
        body: '{"password":"` + canary + `"}'
observers:
  postgres:
    - {name: pg, dsn: "postgres://app:` + canary + `@127.0.0.1:1/db?sslmode=disable"}
assertions:
  - {type: error-rate, stream: s, maxRate: 0.1}
`
	s, err := Parse("secrets.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s.SetDefaults()
	r := s.Redactor()
	c := s.Redacted(r)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(canary)) {
		t.Errorf("redacted scenario holds the canary: %s", b)
	}
	for _, keep := range []string{`"LOG_LEVEL":"info"`, `"Accept":"text/plain"`, "page=2", `"username":"u"`, "postgres://REDACTED@127.0.0.1:1/db",
		`"X-Region":"eu-west"`, `"WORKERS":"8"`, `"MIGRATE_TIMEOUT":"2m"`, `"X-Tenant-Seal":"REDACTED"`, `"TENANT_SEAL":"REDACTED"`,
		`"SETUP_SEAL":"REDACTED"`, "x_seal=REDACTED", "https://REDACTED@127.0.0.1:1/y", `"path":"/ready?seal=REDACTED\u0026page=1"`} {
		if !bytes.Contains(b, []byte(keep)) {
			t.Errorf("redacted scenario lacks %s: %s", keep, b)
		}
	}
	if s.Streams[0].Targets[0].Headers["Cookie"] != "sid="+canary || s.Services[0].Env["GITHUB_PAT"] != canary {
		t.Error("Scenario changed the scenario it was given")
	}
	a, _ := json.Marshal([]any{s.Assertions, s.Timeline})
	ca, _ := json.Marshal([]any{c.Assertions, c.Timeline})
	if !bytes.Equal(a, ca) {
		t.Error("redaction changed the assertions or the timeline")
	}
	// Secrets found in the scenario are known values: free text loses them too.
	if got := r.Text("the app said " + canary); strings.Contains(got, canary) {
		t.Errorf("Text kept a secret found in the scenario: %q", got)
	}
}

// TestReferencesKeptEverywhere: a value written only as ${...} references
// is recorded as written in every field that takes one, sensitive or not
// (basicAuth, a sensitive header, a sensitive env name, a setup env, a
// compose env, a query value); a literal secret beside it is not, and the
// value the reference expands to is redacted wherever it appears.
func TestReferencesKeptEverywhere(t *testing.T) {
	src := `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata: {name: refs}
timeline: {duration: 5s}
services:
  - name: app
    command: [app]
    env:
      DB_PASSWORD: ${env.DB_PASSWORD}
      TENANT_SEAL: ${env.SEAL}
      UPSTREAM: http://${proxies.up.addr}
    setup:
      command: [migrate]
      env:
        MIGRATE_TOKEN: ${env.MIGRATE_TOKEN}
        SEAL: ${env.SEAL}
streams:
  - name: s
    rate: 1/s
    basicAuth: {username: "${env.API_USER}", password: "${env.API_PASSWORD}"}
    targets:
      - url: http://${services.app.addr}/x?token=${env.TOKEN}&seal=${env.SEAL}
        headers: {X-Api-Key: "${env.KEY}", X-Tenant-Seal: "Bearer ${env.SEAL}", X-Mixed: "lit3ral-${env.SEAL}"}
  - name: t
    rate: 1/s
    basicAuth: {username: "${env.API_USER}", password: "pw-${env.API_PASSWORD}"}
    targets:
      - url: http://${services.app.addr}/
`
	s, err := Parse("refs.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	const expanded = "expanded-s3cret-value"
	r := s.Redactor(expanded)
	b, err := json.Marshal(s.Redacted(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"DB_PASSWORD":"${env.DB_PASSWORD}"`, `"TENANT_SEAL":"${env.SEAL}"`, `"UPSTREAM":"http://${proxies.up.addr}"`,
		`"MIGRATE_TOKEN":"${env.MIGRATE_TOKEN}"`, `"SEAL":"${env.SEAL}"`,
		`"username":"${env.API_USER}","password":"${env.API_PASSWORD}"`,
		`token=${env.TOKEN}\u0026seal=${env.SEAL}`,
		`"X-Api-Key":"${env.KEY}"`, `"X-Tenant-Seal":"Bearer ${env.SEAL}"`, `"X-Mixed":"REDACTED"`,
		`"username":"${env.API_USER}","password":"REDACTED"`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("redacted scenario lacks %s: %s", want, b)
		}
	}
	if got := r.Text("the app got " + expanded); strings.Contains(got, expanded) {
		t.Errorf("the value a reference expands to was kept: %q", got)
	}
}

// TestRedactValidation: redact's lists hold names of their kind, and
// nothing the rules call sensitive can be allowed.
func TestRedactValidation(t *testing.T) {
	for _, tc := range []struct{ redact, want string }{
		{"{allowHeaders: [X-Region, X-Build-*], allowQueryKeys: [tenant], allowEnv: [LOG_LEVEL]}", ""},
		{"{allowHeaders: [X-Auth-Mode]}", `redact.allowHeaders[0]: "X-Auth-Mode" names a header drill always redacts`},
		{"{allowHeaders: [Authorization]}", `redact.allowHeaders[0]: "Authorization" names a header drill always redacts`},
		{"{headers: [X-Tenant], allowHeaders: [x-tenant]}", `redact.allowHeaders[0]: "x-tenant" names a header drill always redacts`},
		{"{allowHeaders: ['bad name']}", `redact.allowHeaders[0]: invalid header name "bad name"`},
		{"{allowQueryKeys: [access_token]}", `redact.allowQueryKeys[0]: "access_token" names a query key drill always redacts`},
		{"{queryKeys: [ticket], allowQueryKeys: [Ticket]}", `redact.allowQueryKeys[0]: "Ticket" names a query key drill always redacts`},
		{"{allowQueryKeys: ['']}", `redact.allowQueryKeys[0]: a query key must not be empty`},
		{"{allowEnv: [GITHUB_PAT]}", `redact.allowEnv[0]: "GITHUB_PAT" names a variable drill always redacts`},
		{"{allowEnv: [1BAD]}", `redact.allowEnv[0]: "1BAD" is not an environment variable name`},
		{"{headers: ['a b']}", `redact.headers[0]: invalid header name "a b"`},
	} {
		t.Run(tc.redact, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(minimal+"redact: "+tc.redact+"\n"))
			if err == nil {
				s.SetDefaults()
				err = s.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestDocumentedRules: the scenario reference (Redaction's doc comment)
// names every default header and query key, every allowed header and query
// key and every word rule.
func TestDocumentedRules(t *testing.T) {
	doc := strings.ToLower(typeDocs["Redaction"])
	if doc == "" {
		t.Fatal("Redaction has no doc comment")
	}
	for _, names := range [][]string{redact.DefaultHeaders(), redact.DefaultQueryKeys(), redact.HeaderWords(), redact.KeyWords(),
		redact.AllowedHeaders(), redact.AllowedQueryKeys()} {
		for _, n := range names {
			if !strings.Contains(doc, strings.ToLower(n)) {
				t.Errorf("the Redaction reference does not name %q", n)
			}
		}
	}
}

// TestErrorsDoNotEchoSecrets: a problem with a field that holds a secret
// names the field, not the secret.
func TestErrorsDoNotEchoSecrets(t *testing.T) {
	const canary = "CANARY-5a4b3c"
	t.Setenv("DRILL_TEST_SECRET", canary)
	for _, tc := range []struct{ name, old, new, want string }{
		{"url", "url: http://${proxies.pg.addr}/", "url: htp://u:" + canary + "@h/?token=" + canary, "streams[0].targets[0].url: url"},
		{"body", "url: http://${proxies.pg.addr}/", "url: http://${proxies.pg.addr}/\n        body: '{\"pw\": \"" + canary + "\"} {{.Nope}}'", "streams[0].targets[0].body"},
		{"header", "url: http://${proxies.pg.addr}/", "url: http://${proxies.pg.addr}/\n        headers: {X-Api-Key: [" + canary + "]}", "headers.X-Api-Key"},
		{"basicAuth", "rate: 10/s", "rate: 10/s\n    basicAuth:\n      username: ${env.DRILL_TEST_SECRET}:x\n      password: ${env.DRILL_TEST_MISSING}", "environment variable DRILL_TEST_MISSING is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(minimal, tc.old, tc.new, 1)
			s, err := Parse("t.yaml", []byte(src))
			if err == nil {
				s.SetDefaults()
				err = s.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("the error prints the secret: %v", err)
			}
		})
	}
}
