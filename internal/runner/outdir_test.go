package runner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/record"
)

// logBuffer is a slog sink tests can read while the run writes to it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls until the log holds s, failing after 60 s.
func (l *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not log %q within 60 s; log:\n%s", s, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// runResult is what a run in a goroutine returned.
type runResult struct {
	res Result
	err error
}

// startRun runs opts in a goroutine until ctx ends or the drill does.
func startRun(ctx context.Context, opts Options) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		res, err := Run(ctx, opts)
		done <- runResult{res, err}
	}()
	return done
}

func awaitRun(t *testing.T, done <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(120 * time.Second):
		t.Fatal("the run did not end within 120 s")
	}
	return runResult{}
}

// requireNoJournal fails when stateDir holds a fault journal: a refused run
// must not have started anything.
func requireNoJournal(t *testing.T, stateDir string) {
	t.Helper()
	runs, err := inject.JournalRuns(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) > 0 {
		t.Fatalf("a refused run left journals %v under %s", runs, stateDir)
	}
}

// TestRunRefusesSharedOutDir starts a second run with the --out of a run
// still going: the second is refused with exit 2 naming the first run's id
// before it starts anything, and the directory holds only the first run's
// reports.
func TestRunRefusesSharedOutDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a drill")
	}
	sc := loadScenario(t, "stub-latency.yaml")
	shared := filepath.Join(t.TempDir(), "out")
	var logA logBuffer
	a := runOptions(t, sc, &bytes.Buffer{})
	a.OutDir, a.RunID, a.Logger = shared, "20260101.000000.aaaaaa", logA.logger()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	doneA := startRun(ctx, a)
	logA.waitFor(t, `msg="fault on"`) // A's load runs

	var logB logBuffer
	b := runOptions(t, sc, &bytes.Buffer{})
	b.OutDir, b.RunID, b.Logger = shared, "20260101.000000.bbbbbb", logB.logger()
	resB, errB := Run(context.Background(), b)
	cancel(errors.New("test is done with run A"))
	resA := awaitRun(t, doneA)

	if resB.Code != exitcode.BadInput || errB == nil || !strings.Contains(errB.Error(), a.RunID) || !strings.Contains(errB.Error(), "--out "+shared) {
		t.Fatalf("second run: code %d, err %v; want 2 naming --out %s and run %s", resB.Code, errB, shared, a.RunID)
	}
	if resB.Record != nil || strings.Contains(logB.String(), "proxy ready") {
		t.Fatalf("the refused run started something; its log:\n%s", logB.String())
	}
	requireNoJournal(t, b.StateDir)
	if resA.res.Record == nil {
		t.Fatalf("first run: no record; code %d, err %v", resA.res.Code, resA.err)
	}
	rec, err := record.Load(filepath.Join(shared, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.RunID != a.RunID {
		t.Fatalf("run.json in the shared directory is of run %s, want %s", rec.RunID, a.RunID)
	}
	claim, err := readClaim(filepath.Join(shared, ClaimFile))
	if err != nil || claim.Run != a.RunID {
		t.Fatalf("claim %+v (%v); want run %s", claim, err, a.RunID)
	}
}

// TestRunDefaultOutDirsOfOneSecond starts two runs without --out in the same
// second: each writes its reports into a directory of its own.
func TestRunDefaultOutDirsOfOneSecond(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two drills")
	}
	sc := loadScenario(t, "stub-latency.yaml")
	t.Chdir(t.TempDir())
	ids := []string{"20260101.000000.aaaaaa", "20260101.000000.bbbbbb"}
	logs := make([]*logBuffer, len(ids))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// Start both just after a second begins, so that both default names
	// carry the same second.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	var dones []<-chan runResult
	for i, id := range ids {
		logs[i] = &logBuffer{}
		o := runOptions(t, sc, &bytes.Buffer{})
		o.OutDir, o.RunID, o.Logger = "", id, logs[i].logger()
		dones = append(dones, startRun(ctx, o))
	}
	for _, l := range logs {
		l.waitFor(t, `msg="fault on"`) // its load runs
	}
	cancel(errors.New("test is done with both runs"))
	seen := map[string]string{}
	for i, done := range dones {
		r := awaitRun(t, done)
		if r.res.OutDir == "" {
			t.Fatalf("run %s wrote no reports: code %d, err %v", ids[i], r.res.Code, r.err)
		}
		if other, ok := seen[r.res.OutDir]; ok {
			t.Fatalf("runs %s and %s both wrote into %s", other, ids[i], r.res.OutDir)
		}
		seen[r.res.OutDir] = ids[i]
		rec, err := record.Load(filepath.Join(r.res.OutDir, "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		if rec.RunID != ids[i] {
			t.Fatalf("%s/run.json is of run %s, want %s", r.res.OutDir, rec.RunID, ids[i])
		}
	}
}

// TestRunRefusesUnusableOutDir checks --out before anything starts: a
// directory that cannot be created or written, or that belongs to another
// run, is refused with exit 2 naming --out, no journal is written and
// nothing of the refused run is left on disk.
func TestRunRefusesUnusableOutDir(t *testing.T) {
	sc := loadScenario(t, "stub-latency.yaml")
	tests := []struct {
		name string
		// setup prepares root and returns the --out to pass.
		setup    func(t *testing.T, root string) string
		want     []string
		rootOnly bool // skipped when the test runs as root
	}{
		{"a file", func(t *testing.T, root string) string {
			p := filepath.Join(root, "file")
			writeFile(t, p, "x")
			return p
		}, []string{"is a file, not a directory"}, false},
		{"under a file", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "file"), "x")
			return filepath.Join(root, "file", "sub", "out")
		}, []string{"cannot be created", "not a directory"}, false},
		{"read-only parent", func(t *testing.T, root string) string {
			ro := filepath.Join(root, "ro")
			if err := os.Mkdir(ro, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })
			return filepath.Join(ro, "new", "out")
		}, []string{"cannot be created", "permission denied"}, true},
		{"read-only directory", func(t *testing.T, root string) string {
			ro := filepath.Join(root, "ro")
			if err := os.Mkdir(ro, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })
			return ro
		}, []string{"cannot be written", "permission denied"}, true},
		{"claimed by another run", func(t *testing.T, root string) string {
			out := filepath.Join(root, "out")
			writeFile(t, filepath.Join(out, ClaimFile), `{"run":"20250101.000000.cccccc","pid":1,"startedAt":"2025-01-01T00:00:00Z"}`)
			return out
		}, []string{"belongs to run 20250101.000000.cccccc", "choose another --out"}, false},
		{"reports without a claim", func(t *testing.T, root string) string {
			out := filepath.Join(root, "out")
			writeFile(t, filepath.Join(out, "run.json"), `{"runId":"20250101.000000.dddddd"}`)
			return out
		}, []string{"already holds the reports of run 20250101.000000.dddddd"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rootOnly && os.Geteuid() == 0 {
				t.Skip("root writes into read-only directories")
			}
			root := t.TempDir()
			out := tc.setup(t, root)
			before := listTree(t, root)
			var log logBuffer
			opts := runOptions(t, sc, &bytes.Buffer{})
			opts.OutDir, opts.Logger = out, log.logger()
			res, err := Run(context.Background(), opts)
			if res.Code != exitcode.BadInput || err == nil {
				t.Fatalf("code %d, err %v; want exit 2", res.Code, err)
			}
			for _, w := range append([]string{"--out " + out}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if res.Record != nil || strings.Contains(log.String(), "proxy ready") {
				t.Fatalf("the refused run started something; its log:\n%s", log.String())
			}
			requireNoJournal(t, opts.StateDir)
			if after := listTree(t, root); after != before {
				t.Fatalf("the refused run changed %s:\nbefore:\n%safter:\n%s", root, before, after)
			}
		})
	}
}

// TestRunEarlyErrorLeavesNoOutDir: a run that fails before it wrote any log
// or report (here: its fault journal cannot be opened) leaves no report
// directory behind.
func TestRunEarlyErrorLeavesNoOutDir(t *testing.T) {
	opts := runOptions(t, loadScenario(t, "stub-latency.yaml"), &bytes.Buffer{})
	writeFile(t, opts.StateDir, "not a directory")
	opts.OutDir = filepath.Join(filepath.Dir(opts.OutDir), "new", "out")
	res, err := Run(context.Background(), opts)
	if res.Code != exitcode.CouldNotRun || err == nil {
		t.Fatalf("code %d, err %v; want 3", res.Code, err)
	}
	if _, err := os.Stat(filepath.Dir(opts.OutDir)); !os.IsNotExist(err) {
		t.Fatalf("the failed run left %s: %v", filepath.Dir(opts.OutDir), err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listTree lists every path under root with its size, one per line.
func listTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(p, root) + " " + info.Mode().String())
		if !d.IsDir() {
			b.WriteString(" " + strings.Repeat("*", int(min(info.Size(), 8))))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
