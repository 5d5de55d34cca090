package runner

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
)

// TestComposeSecrets: a sensitive environment value the Compose file
// writes is a secret of the run, so a healthcheck output that echoes it
// (a probe event's detail) does not reach run.json, and drill's logs and
// errors lose it too.
func TestComposeSecrets(t *testing.T) {
	const canary = "CANARY-pg-4f1e"
	dir := t.TempDir()
	yml := "services:\n  db:\n    image: x\n    environment:\n      POSTGRES_PASSWORD: " + canary + "\n      LOG_LEVEL: info\n" +
		"      TENANT_SEAL: seal-" + canary + "\n      POOL_TIMEOUT: 30s\n      ALLOWED_NOTE: note-" + canary + "\n"
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := &scenario.Scenario{File: filepath.Join(dir, "s.yaml"), Environment: scenario.Environment{
		Type: scenario.EnvCompose, Compose: &scenario.ComposeEnv{File: "compose.yaml"}},
		Redact: scenario.Redaction{AllowEnv: []string{"ALLOWED_NOTE"}}}
	_, secrets := startVars(sc, "r1", func(string) (string, bool) { return "", false })
	// TENANT_SEAL is on no list of sensitive names, but no list keeps it
	// either; LOG_LEVEL's value is too short to replace in free text,
	// POOL_TIMEOUT's is harmless and ALLOWED_NOTE is allowed.
	if got := strings.Join(sortedCopy(secrets), " "); got != canary+" seal-"+canary {
		t.Errorf("secrets %q, want the Compose file's POSTGRES_PASSWORD and TENANT_SEAL", secrets)
	}
	rec := record.Redact(&record.Run{Scenario: sc, Secrets: secrets, Events: []event.Event{
		{Kind: event.ProbeResult, Detail: "psql: password " + canary + " rejected"}}})
	if d := rec.Events[0].Detail; strings.Contains(d, canary) {
		t.Errorf("run.json keeps the Compose file's secret in a probe event: %q", d)
	}
	if got := sc.Redactor(secrets...).Text("db said " + canary); strings.Contains(got, canary) {
		t.Errorf("the run's redactor keeps the Compose file's secret: %q", got)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}
