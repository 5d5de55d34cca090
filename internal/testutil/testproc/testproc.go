// Package testproc runs processes for tests: the test binary itself again
// as a helper process, and Go binaries built once per test binary. It
// imports no drill package, so any package's tests may use it (unlike
// [github.com/drillhq/drill/internal/testutil], which needs deps).
package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// HelperMain is the first statement of a TestMain whose test binary also
// serves as a helper process: when the environment variable env is "1" it
// runs helper and exits with the code helper returns; otherwise it returns
// and TestMain goes on to run the tests.
func HelperMain(env string, helper func() int) {
	if os.Getenv(env) == "1" {
		os.Exit(helper())
	}
}

// Executable is the path of the running test binary; it fails tb when the
// path cannot be found.
func Executable(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("find the test binary: %v", err)
	}
	return exe
}

// Command returns an unstarted command that runs the test binary again as
// the helper process [HelperMain] selects with env: no tests run
// (-test.run ^$) and the environment is this process's plus env=1.
func Command(tb testing.TB, env string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(Executable(tb), "-test.run", "^$")
	cmd.Env = append(os.Environ(), env+"=1")
	return cmd
}

// GoTool is the go command of the toolchain running the tests
// ($GOROOT/bin/go), else the one on PATH, else /usr/local/go/bin/go when it
// exists, else "go".
func GoTool() string {
	if p := FindGo(); p != "" {
		return p
	}
	return "go"
}

// FindGo is [GoTool] without the last resort: "" when no go command exists,
// so a test can skip saying why.
func FindGo() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); FileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := "/usr/local/go/bin/go"; FileExists(p) {
		return p
	}
	return ""
}

// FileExists reports whether path names something that exists (a file, a
// directory, ...) and can be looked at.
func FileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Tail returns the last n lines of a process's output b (a trailing
// newline does not count as an empty last line), for a test's failure
// message.
func Tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Target is one binary for [Builds.Build]: Name is its file name in the
// build directory, Pkg the package path given to `go build`.
type Target struct {
	Name, Pkg string
}

// Builds builds Go binaries once per test binary, lazily on the first
// [Builds.Build] (so -short and -run filters that match nothing build
// nothing), into one temporary directory. The zero value is ready to use;
// call [Builds.Remove] from TestMain after the tests. Safe for concurrent
// use.
type Builds struct {
	once  sync.Once
	dir   string
	paths map[string]string
	err   error
}

// Build runs `go build` for every target in moduleDir (the module's
// directory, relative to the test's working directory or absolute) on the
// first call and returns the binaries' paths by target name. Later calls
// return the first call's result whatever their arguments. A failed build
// fails tb, with the go command's output, on this and every later call.
func (b *Builds) Build(tb testing.TB, moduleDir string, targets ...Target) map[string]string {
	tb.Helper()
	b.once.Do(func() { b.paths, b.err = b.build(moduleDir, targets) })
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.paths
}

func (b *Builds) build(moduleDir string, targets []Target) (map[string]string, error) {
	root, err := filepath.Abs(moduleDir)
	if err != nil {
		return nil, fmt.Errorf("find module directory: %w", err)
	}
	if b.dir, err = os.MkdirTemp("", "drill-testbin-"); err != nil {
		return nil, fmt.Errorf("create build directory: %w", err)
	}
	paths := make(map[string]string, len(targets))
	for _, t := range targets {
		out := filepath.Join(b.dir, t.Name)
		cmd := exec.Command(GoTool(), "build", "-o", out, t.Pkg)
		cmd.Dir = root
		if combined, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v: %s", t.Pkg, err, combined)
		}
		paths[t.Name] = out
	}
	return paths, nil
}

// Remove deletes the build directory, if any was made.
func (b *Builds) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}
