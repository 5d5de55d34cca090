package app

import (
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/testutil/promtest"
)

// TestRunPush: drill run --push pushes the run's figures to a real
// Pushgateway; an unreachable one leaves the run's verdict and reports
// standing (the failure is reported, naming the URL) and is an exit code
// of its own (3) only with --push-required.
func TestRunPush(t *testing.T) {
	// The smallest run: a stub, 10 requests a second for 3 s; a lag
	// budget no busy machine exceeds, so the run passes and the push
	// alone decides the exit code.
	scenario := filepath.Join(t.TempDir(), "push.yaml")
	if err := os.WriteFile(scenario, []byte(`apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: push-test
timeline:
  duration: 3s
dependencies:
  - name: stub
    httpStub: {}
streams:
  - name: requests
    targets:
      - url: ${dependencies.stub.url}/
    rate: 10/s
    lagBudget:
      late: 10s
      fraction: 1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	pg := promtest.Pushgateway(t)

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stderr  string // "" : none about the push
		metrics bool   // the Pushgateway holds the run's figures
	}{
		{"pushed", []string{"--push", pg.URL, "--environment", "ci"}, 0, "", true},
		{"unreachable", []string{"--push", gone}, 0, "drill: exporting the run's metrics failed: push run", false},
		{"unreachable and required", []string{"--push", gone, "--push-required"}, 3, "exporting the run's metrics failed (--push-required): push run", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "reports")
			args := append([]string{"run", "--out", out, "--state-dir", t.TempDir()}, tc.args...)
			code, stdout, stderr := drill(t, append(args, scenario)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if tc.stderr != "" && (!strings.Contains(stderr, tc.stderr) || !strings.Contains(stderr, "Pushgateway "+gone)) {
				t.Errorf("stderr:\n%s\nwant it to contain %q and name %s", stderr, tc.stderr, gone)
			}
			if tc.stderr == "" && strings.Contains(stderr, "export") {
				t.Errorf("stderr speaks of the export:\n%s", stderr)
			}
			// The run's reports stand whatever the push did.
			var found []string
			filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (d.Name() == "run.json" || d.Name() == "junit.xml") {
					found = append(found, d.Name())
				}
				return nil
			})
			if len(found) != 2 {
				t.Errorf("reports under %s: %v, want run.json and junit.xml", out, found)
			}
			if tc.metrics {
				resp, err := http.Get(pg.URL + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := `drill_run_exit_code{environment="ci",instance="",job="drill",scenario="push-test"} 0`
				if !strings.Contains(string(b), want) {
					t.Errorf("Pushgateway lacks %s", want)
				}
			}
		})
	}
}

// TestExportBadRecord: drill export of a truncated, corrupt or foreign
// run.json, or of a directory without one, is exit 2 naming the file or
// directory, and pushes nothing.
func TestExportBadRecord(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	b, err := os.ReadFile(night1 + "/run.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, content []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := t.TempDir()
	// Nothing listens there: a push attempted would be exit 3, not 2.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"truncated", write("truncated.json", b[:len(b)/2]), "not a JSON run record"},
		{"not JSON", write("garbage.json", []byte("\x00\x01garbage")), "not a JSON run record"},
		{"not a run record", write("other.json", []byte(`{"kind":"Scenario"}`)), "no schemaVersion"},
		{"other schema version", write("v0.json", []byte(`{"schemaVersion":"drill.dev/run/v0"}`)), `schema "drill.dev/run/v0" is not supported`},
		{"empty directory", empty, empty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := drill(t, "export", tc.path, "--pushgateway", gone)
			if code != 2 || !strings.Contains(stderr, tc.path) || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want 2; stderr:\n%s\nwant it to name %s and contain %q", code, stderr, tc.path, tc.want)
			}
		})
	}
}
