package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistory: three real nights judge with exit 0 and write the trend
// page; an invalid newest night is exit 4; bad input is exit 2.
func TestHistory(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	out := t.TempDir()
	code, stdout, stderr := drill(t, "history", "testdata/runs/orders-db-brownout-short", "--out", out)
	if code != 0 || !strings.Contains(stdout, "HISTORY: NO REGRESSION (exit 0)") || !strings.Contains(stdout, "3 nights") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	page, err := os.ReadFile(filepath.Join(out, "history.html"))
	if err != nil || !strings.Contains(string(page), "data:image/png;base64,") {
		t.Fatalf("trend page: %v", err)
	}
	code, _, stderr = drill(t, "history", "--last", "2", "--out", out, "testdata/runs/orders-db-brownout-short")
	if code != 1 || !strings.Contains(stderr, "regression: stream orders after-recovery ok-p99: p99 of successful requests 5.68ms -> 12.4ms") {
		t.Fatalf("--last 2: exit %d, stderr:\n%s", code, stderr)
	}
	// Nights 2 and 3 differ by 6.75ms in after-recovery p99 (5.68ms -> 12.4ms), a regression by the default 5ms slack; --p99-slack widens it.
	code, stdout, _ = drill(t, "history", "-o", "json", "--last", "2", "--p99-slack", "10ms", "--html", filepath.Join(out, "h.html"), "testdata/runs/orders-db-brownout-short")
	var rep struct {
		Nights    []json.RawMessage `json:"nights"`
		Judgement struct {
			Baseline []string `json:"baseline"`
		} `json:"judgement"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || len(rep.Nights) != 2 || len(rep.Judgement.Baseline) != 1 {
		t.Fatalf("-o json --last 2: exit %d, %v, %d nights", code, err, len(rep.Nights))
	}

	// The newest night invalid: exit 4.
	dir := t.TempDir()
	b, err := os.ReadFile(night1 + "/run.json")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "run.json"), b, 0o644)
	var m map[string]any
	json.Unmarshal(b, &m)
	m["runId"] = "later"
	m["startedAt"] = "2030-01-01T00:00:00Z"
	m["validity"] = map[string]any{"problems": []string{"synthetic problem"}}
	b, _ = json.Marshal(m)
	os.MkdirAll(filepath.Join(dir, "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "b", "run.json"), b, 0o644)
	code, _, stderr = drill(t, "history", "--out", out, dir)
	if code != 4 || !strings.Contains(stderr, "not comparable: the newest run "+filepath.Join(dir, "b", "run.json")+" is invalid") {
		t.Fatalf("invalid newest: exit %d, stderr:\n%s", code, stderr)
	}

	// A night killed before it wrote its reports (seconds.jsonl only) is
	// named on stderr with the command that writes them, not skipped in
	// silence.
	killed := filepath.Join(dir, "c")
	os.MkdirAll(killed, 0o755)
	os.WriteFile(filepath.Join(killed, "seconds.jsonl"), []byte("{}\n"), 0o644)
	_, _, stderr = drill(t, "history", "--out", out, dir)
	if !strings.Contains(stderr, killed+" holds a run that never finished writing its reports") || !strings.Contains(stderr, "drill report "+killed) {
		t.Fatalf("killed night: stderr:\n%s", stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no runs", []string{t.TempDir()}, "no run.json under"},
		{"no arguments", nil, "takes at least 1 argument"},
		{"bad since", []string{"--since", "yesterday", night1}, `--since "yesterday"`},
		{"bad baseline nights", []string{"--baseline-nights", "0", night1}, "--baseline-nights at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := drill(t, append([]string{"history", "--out", out}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want 2; stderr:\n%s\nwant it to contain %q", code, stderr, tc.want)
			}
		})
	}
}
