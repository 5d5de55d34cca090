package testproc

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const helperEnv = "DRILL_TESTPROC_HELPER"

var builds Builds

func TestMain(m *testing.M) {
	HelperMain(helperEnv, func() int {
		os.Stdout.WriteString("helper " + os.Getenv(helperEnv) + "\n")
		return 7
	})
	code := m.Run()
	builds.Remove()
	os.Exit(code)
}

// TestCommandRunsTheHelper: the re-executed test binary runs the helper
// (not the tests) and exits with its code.
func TestCommandRunsTheHelper(t *testing.T) {
	out, err := Command(t, helperEnv).Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("helper exit: %v, want exit code 7", err)
	}
	if got := string(out); got != "helper 1\n" {
		t.Fatalf("helper output %q, want %q", got, "helper 1\n")
	}
}

// TestBuildsOnce: the first Build builds, later ones reuse its binaries.
func TestBuildsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	first := builds.Build(t, ".", Target{Name: "hello", Pkg: "./testdata/hello"})
	out, err := exec.Command(first["hello"]).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("built binary: %q, %v; want hello", out, err)
	}
	info, err := os.Stat(first["hello"])
	if err != nil {
		t.Fatal(err)
	}
	again := builds.Build(t, ".", Target{Name: "other", Pkg: "./does-not-exist"})
	if again["hello"] != first["hello"] || len(again) != 1 {
		t.Fatalf("second Build returned %v, want the first build's %v", again, first)
	}
	if info2, err := os.Stat(again["hello"]); err != nil || !info2.ModTime().Equal(info.ModTime()) {
		t.Fatalf("second Build rebuilt the binary: %v", err)
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb"},
		{"", 3, ""},
	} {
		if got := Tail([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
