package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed, fatal bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed, r.fatal = true, true; panic(r) }

func check(path string, got []byte, update bool) (r *recorder) {
	r = &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	Check(r, path, got, update)
	return r
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.golden")
	if r := check(path, []byte("a\n"), false); !r.fatal {
		t.Fatal("a missing golden file passed")
	}
	if r := check(path, []byte("a\n"), true); r.failed {
		t.Fatal("update failed")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\n" {
		t.Fatalf("update wrote %q, %v", b, err)
	}
	if r := check(path, []byte("a\n"), false); r.failed {
		t.Fatal("equal output failed")
	}
	if r := check(path, []byte("b\n"), false); !r.failed || r.fatal {
		t.Fatalf("different output: failed %v fatal %v, want a non-fatal failure", r.failed, r.fatal)
	}
}
