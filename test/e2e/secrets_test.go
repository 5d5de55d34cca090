package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/testutil/testproc"
)

// secretMarker ends every secret planted in testdata/secrets.yaml.tmpl.
const secretMarker = "7f3a9e1dCANARY"

// TestNoSecretsInAnyArtifact plants a secret in every place the redaction
// rules cover (sensitive headers of each kind and one named by the
// scenario's redact option, a header, a query key and env names that
// appear in no list, URL userinfo with a password and a token-only one,
// sensitive query keys, a URL and a key=value DSN in allowed service env,
// env variables with sensitive names, a setup's env echoed by the setup,
// flag arguments, a probe header, request bodies, ${env.NAME} values in
// several fields, a basicAuth password) and checks that none reaches drill
// validate's, drill plan's (text and JSON) or a real drill run's stdout
// and stderr (-v logs), nor any file the run wrote (reports, pod logs, the
// state directory), nor drill report's re-judged reports; and that drill
// report re-judges the redacted run.json.
func TestNoSecretsInAnyArtifact(t *testing.T) {
	if testing.Short() {
		t.Skip("builds drill and runs a 3 s drill")
	}
	drill, _ := binaries(t)
	c := newCase(t)
	t.Setenv("DRILL_E2E_ENV_SECRET", "envref"+secretMarker)
	t.Setenv("DRILL_E2E_ENV_TOKEN", "envtoken"+secretMarker)
	scenario := c.writeScenario(t, "secrets.yaml.tmpl", map[string]string{
		"Marker": secretMarker, "ServiceExe": testproc.Executable(t),
	})
	if b, err := os.ReadFile(scenario); err != nil || bytes.Count(b, []byte(secretMarker)) < 20 {
		t.Fatalf("the scenario holds too few planted secrets (%v)", err)
	}

	noSecret := func(what, text string) {
		t.Helper()
		if i := strings.Index(text, secretMarker); i >= 0 {
			t.Errorf("%s holds a secret: ...%s...", what, text[max(0, i-80):min(len(text), i+len(secretMarker)+20)])
		}
	}
	for _, args := range [][]string{
		{"validate", scenario},
		{"plan", scenario},
		{"plan", "-o", "json", scenario},
	} {
		code, stdout, stderr := runCaptured(t, c, drill, args...)
		if code != 0 {
			t.Fatalf("drill %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		noSecret("drill "+strings.Join(args, " ")+" stdout", stdout)
		noSecret("drill "+strings.Join(args, " ")+" stderr", stderr)
	}

	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	code, _ := p.exit()
	if code != 0 {
		t.Fatalf("drill run: exit %d", code)
	}
	noSecret("drill run stdout", p.stdout.String())
	noSecret("drill run stderr", p.stderr())
	rec := readReports(t, c.Out)
	if rec.RunID != c.RunID {
		t.Fatalf("run.json is of run %q, want %q", rec.RunID, c.RunID)
	}
	run, err := os.ReadFile(filepath.Join(c.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The places were recorded, redacted: the planted secrets did go
	// through the writers.
	for _, want := range []string{`"Cookie": "REDACTED"`, `"GITHUB_PAT": "REDACTED"`, "http://REDACTED@${services.app.addr}/ready?token=REDACTED",
		"postgres://REDACTED@127.0.0.1:1", "password=REDACTED", "token=REDACTED", "${env.DRILL_E2E_ENV_SECRET}",
		`"password": "REDACTED"`, "bytes, sha256:",
		`"X-Tenant-Seal": "REDACTED"`, `"Ocp-Apim-Subscription-Key": "REDACTED"`, `"Accept": "text/plain"`,
		`"TENANT_SEAL": "REDACTED"`, `"ERROR_TRACKER_DSN": "REDACTED"`, `"SETUP_SEAL": "REDACTED"`, `"WORKERS": "4"`,
		"http://REDACTED@${services.app.addr}/ready?seal=REDACTED\u0026page=2",
		`"Authorization": "Bearer ${env.DRILL_E2E_ENV_TOKEN}"`} {
		if !bytes.Contains(run, []byte(want)) {
			t.Errorf("run.json lacks %s", want)
		}
	}
	pods, _ := filepath.Glob(filepath.Join(c.Out, "logs", "*.log"))
	if len(pods) == 0 {
		t.Error("the run wrote no pod log")
	}
	// The setup echoed two values redacted only because no list keeps
	// their names: its log holds the line, without them.
	if b, err := os.ReadFile(filepath.Join(c.Out, "logs", "app-setup.log")); err != nil || !bytes.Contains(b, []byte("setup sees REDACTED and REDACTED")) {
		t.Errorf("the setup log lacks its redacted line (%v):\n%s", err, b)
	}

	rejudged := filepath.Join(c.Dir, "rejudged")
	if code, stdout, stderr := runCaptured(t, c, drill, "report", "--out", rejudged, filepath.Join(c.Out, "run.json")); code != rec.ExitCode {
		t.Errorf("drill report of the redacted run.json: exit %d, want the run's %d\n%s%s", code, rec.ExitCode, stdout, stderr)
	} else {
		noSecret("drill report stdout", stdout)
		noSecret("drill report stderr", stderr)
	}

	// Every file under the case directory but the scenario itself: the
	// reports, the pod logs, the re-judged reports, the state directory
	// (fault journals) and drill's TMPDIR.
	files := 0
	err = filepath.WalkDir(c.Dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == scenario {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		noSecret(strings.TrimPrefix(path, c.Dir+"/"), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 4 {
		t.Errorf("found only %d files the run wrote", files)
	}
}

// runCaptured runs a short drill command to completion in the case's
// environment and returns its exit code, stdout and stderr.
func runCaptured(t *testing.T, c *caseEnv, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = c.Dir, c.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("drill %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}
