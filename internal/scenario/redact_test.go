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
redact: {headers: [X-Tenant], queryKeys: [ticket]}
services:
  - name: app
    command: [app, --password, ` + canary + `, --token=` + canary + `]
    env:
      GITHUB_PAT: ` + canary + `
      DATABASE_URL: postgres://app:` + canary + `@127.0.0.1:1/db
      PG_DSN: host=127.0.0.1 password=` + canary + ` dbname=db
      LOG_LEVEL: info
    probes:
      readinessProbe:
        httpGet: {path: /ready, httpHeaders: [{name: X-Api-Key, value: ` + canary + `}]}
streams:
  - name: s
    rate: 1/s
    basicAuth: {username: u, password: ` + canary + `}
    targets:
      - url: http://u:` + canary + `@127.0.0.1:1/x?token=` + canary + `&ticket=` + canary + `&page=2
        method: POST
        headers: {Cookie: "sid=` + canary + `", X-Auth-Token: ` + canary + `, X-Tenant: ` + canary + `, Accept: text/plain}
        body: '{"password":"` + canary + `"}'
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
	for _, keep := range []string{`"LOG_LEVEL":"info"`, `"Accept":"text/plain"`, "page=2", `"username":"u"`, "postgres://app:REDACTED@127.0.0.1:1/db"} {
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

// TestDocumentedRules: the scenario reference (Redaction's doc comment)
// names every default header and query key and every word rule.
func TestDocumentedRules(t *testing.T) {
	doc := strings.ToLower(typeDocs["Redaction"])
	if doc == "" {
		t.Fatal("Redaction has no doc comment")
	}
	for _, names := range [][]string{redact.DefaultHeaders(), redact.DefaultQueryKeys(), redact.HeaderWords(), redact.KeyWords()} {
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
