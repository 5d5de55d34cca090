package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/inject"
)

func TestCleanupCommand(t *testing.T) {
	state := t.TempDir()
	// A killed run's journal: a process pause whose group no longer exists.
	j, err := inject.OpenJournal(state, "20260101.000000.abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(inject.Entry{Op: inject.OpApply, Key: "process-pause/999999", Kind: inject.KindProcessPause, PGID: 999999}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	getenv := func(k string) string {
		if k == "XDG_STATE_HOME" {
			return state
		}
		return ""
	}
	tests := []struct {
		name     string
		args     []string
		getenv   func(string) string
		code     int
		out, err string
	}{
		{"journal undone", []string{"cleanup", "--state-dir", state}, nil, 0, "gone     process group 999999 stopped (run 20260101.000000.abcdef)", ""},
		{"second time nothing", []string{"cleanup", "--state-dir", state}, nil, 0, "nothing to clean up", ""},
		{"state dir from XDG_STATE_HOME", []string{"cleanup", "--run", "20260101.000000.abcdef"}, getenv, 0, "nothing to clean up", ""},
		{"bad run id", []string{"cleanup", "--run", "Bad-ID"}, getenv, 2, "", "--run: run id"},
		{"unreachable toxiproxy", []string{"cleanup", "--state-dir", state, "--toxiproxy", "http://127.0.0.1:1"}, nil, 5, "", "sweep http://127.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if tc.getenv == nil {
				tc.getenv = func(string) string { return "" }
			}
			code := Execute(context.Background(), &stdout, &stderr, tc.args, tc.getenv)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
				t.Fatalf("code %d stdout %q stderr %q", code, stdout.String(), stderr.String())
			}
		})
	}
}
