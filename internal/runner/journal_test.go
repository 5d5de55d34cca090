package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// neverReady is a run that fails after bring-up: a throwaway PostgreSQL, a
// proxy in front of it on the embedded Toxiproxy, and a service whose
// readiness probe never passes within a 2 s readyTimeout.
const neverReady = `apiVersion: drill.dev/v1alpha1
kind: Scenario
metadata:
  name: never-ready
timeline:
  duration: 5s
  readyTimeout: 2s
dependencies:
  - name: db
    postgres:
      mode: binaries
proxies:
  - name: db
    upstream: ${dependencies.db.addr}
services:
  - name: app
    command: [sleep, "60"]
    terminationGracePeriodSeconds: 1
    probes:
      readinessProbe:
        tcpSocket:
          port: http
        periodSeconds: 1
streams:
  - name: requests
    targets:
      - url: ${services.app.url}/
    rate: 1/s
`

// TestRunErrorExitRemovesSettledJournal: a run that ends in an error
// after it started a PostgreSQL and created a proxy reverts both, removes
// PostgreSQL's temp dir and, since nothing is left for drill cleanup,
// removes its journal too.
func TestRunErrorExitRemovesSettledJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	_, err := dependencies.LookPostgres()
	needs.Part(t, "PostgreSQL server binaries", err)
	dir, err := os.MkdirTemp("", "drill-runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, tmp} {
		if err := os.Chmod(d, 0o755); err != nil { // PostgreSQL runs as another user under root
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	path := filepath.Join(dir, "never-ready.yaml")
	if err := os.WriteFile(path, []byte(neverReady), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	opts := runOptions(t, sc, &bytes.Buffer{})
	opts.Logger = log.logger()
	opts.RunID = "20260101.000000.eeeeee"
	res, err := Run(context.Background(), opts)
	if res.Code != exitcode.CouldNotRun || err == nil || !strings.Contains(err.Error(), "did not become ready") {
		t.Fatalf("code %d, err %v; want 3, not ready", res.Code, err)
	}
	if !strings.Contains(log.String(), `msg="postgres started"`) {
		t.Fatalf("PostgreSQL did not start; log:\n%s", log.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "drill-pg-*")); len(left) > 0 {
		t.Fatalf("PostgreSQL's temp dir remains: %v", left)
	}
	if _, err := os.Stat(inject.JournalPath(opts.StateDir, opts.RunID)); !os.IsNotExist(err) {
		entries, _ := inject.ReadJournal(inject.JournalPath(opts.StateDir, opts.RunID))
		t.Fatalf("the journal of a fully reverted run remains (%v); pending %+v", err, inject.Pending(entries))
	}
}
