package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/testutil/needs"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestFilter feeds real `go test -json` streams (testdata/*.json, recorded
// from a sample package: a passing test that logs, a skip, a subtest that
// logs a rerun and runs 1.2 s, a skipped subtest; fail.json has one test
// failing, buildfail.json a package that does not compile) and compares
// the text, the notes and the error with testdata/*.golden.
func TestFilter(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var out bytes.Buffer
			notes, ferr := filter(f, &out, time.Second)
			out.WriteString("-- notes --\n")
			for _, n := range notes {
				b, _ := json.Marshal(n)
				out.Write(append(b, '\n'))
			}
			out.WriteString("-- error --\n")
			if ferr != nil {
				out.WriteString(ferr.Error() + "\n")
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./tools/testsum -update writes it)", err)
			}
			if out.String() != string(want) {
				t.Errorf("filter output differs from %s:\n%s", golden, out.String())
			}
		})
	}
}

// TestFilterExitsOnFailureOnly: a failed test or build is errFailed, a
// clean stream with skips is not, and a stream without events is an
// error (go test was not run with -json).
func TestFilterExitsOnFailureOnly(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr error
		anyErr  bool
	}{
		{in: "pass.json"},
		{in: "fail.json", wantErr: errFailed},
		{in: "buildfail.json", wantErr: errFailed},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.in))
		if err != nil {
			t.Fatal(err)
		}
		_, ferr := filter(bytes.NewReader(b), &bytes.Buffer{}, time.Second)
		if !errors.Is(ferr, tc.wantErr) || (tc.wantErr == nil && ferr != nil) {
			t.Errorf("%s: error %v, want %v", tc.in, ferr, tc.wantErr)
		}
	}
	if _, err := filter(strings.NewReader("ok  \tpkg\t0.1s\n"), &bytes.Buffer{}, time.Second); err == nil {
		t.Error("plain text without events: no error")
	}
}

func TestSummaryLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		notes []note
		want  string
	}{
		{name: "none", want: "make test: 0 skipped, 0 rerun: every test ran, none rerun"},
		{name: "skips and a rerun, skips first", notes: []note{
			{Kind: "rerun", Package: "github.com/drillhq/drill/internal/runner", Test: "TestRunStubLatency", Reason: "the drill came back INVALID: generator 3.1 % late"},
			{Kind: "skip", Package: "github.com/drillhq/drill/internal/console", Test: "TestConsoleInBrowser", Reason: "Chromium missing: not on PATH"},
		}, want: "make test: 1 skipped, 1 rerun: skip internal/console TestConsoleInBrowser (Chromium missing: not on PATH); " +
			"rerun internal/runner TestRunStubLatency (the drill came back INVALID: generator 3.1 % late)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summaryLine(tc.notes); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestNotesRoundTrip: what -record appends (over several go test runs)
// -summary reads back.
func TestNotesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skips.jsonl")
	a := []note{{Kind: "skip", Package: "p", Test: "TestA", Reason: "r1"}}
	b := []note{{Kind: "rerun", Package: "q", Test: "TestB", Reason: "r2"}}
	for _, n := range [][]note{a, nil, b} {
		if err := appendNotes(path, n); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readNotes(path)
	if err != nil || len(got) != 2 || got[0] != a[0] || got[1] != b[0] {
		t.Fatalf("read back %v (%v), want %v then %v", got, err, a, b)
	}
	if none, err := readNotes(filepath.Join(t.TempDir(), "missing")); err != nil || none != nil {
		t.Errorf("missing file: %v, %v", none, err)
	}
}

func TestRerunMarkerMatchesNeeds(t *testing.T) {
	if rerunMarker != needs.RerunMarker {
		t.Fatalf("rerunMarker %q, needs.RerunMarker %q", rerunMarker, needs.RerunMarker)
	}
}

func TestSkipReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output []string
		want   string
	}{
		{name: "one line", output: []string{"=== RUN   TestX\n", "    x_test.go:12: Docker engine missing: no socket\n", "--- SKIP: TestX (0.00s)\n"},
			want: "Docker engine missing: no socket"},
		{name: "a library's banner before it is left out", output: []string{"=== RUN   TestX\n",
			"2026/12/06 15:43:34 github.com/testcontainers/testcontainers-go - Connected to docker: \n",
			"  Server Version: 20.10.24\n",
			"    x_test.go:197: image postgres:16-alpine is not present locally\n", "--- SKIP: TestX (0.01s)\n"},
			want: "image postgres:16-alpine is not present locally"},
		{name: "continuation lines joined", output: []string{"    x_test.go:5: first\n        second\n", "--- SKIP: TestX (0.00s)\n"},
			want: "first second"},
		{name: "the last message is the skip", output: []string{"    x_test.go:5: started a server\n", "    x_test.go:9: -short\n"},
			want: "-short"},
		{name: "none", output: []string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, want: "no reason given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := skipReason(tc.output); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
