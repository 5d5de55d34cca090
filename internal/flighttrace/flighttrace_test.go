package flighttrace

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNilAndEmpty(t *testing.T) {
	r, err := Start("", time.Second, nil)
	if r != nil || err != nil {
		t.Fatalf("Start(\"\") = %v, %v; want nil, nil", r, err)
	}
	r.Trigger("nothing") // a nil recorder does nothing
	if r.Stop() {
		t.Fatal("a nil recorder reported a trigger")
	}
}

// TestTriggerWritesOnce: the first trigger writes a Go execution trace of
// the recent past; later triggers change nothing.
func TestTriggerWritesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.trace")
	r, err := Start(path, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // something to trace
		defer close(done)
		for i := 0; i < 1000; i++ {
			time.Sleep(10 * time.Microsecond)
		}
	}()
	<-done
	r.Trigger("first")
	r.Trigger("second")
	if !r.Stop() {
		t.Fatal("Stop says nothing was triggered")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("%s does not start like a Go execution trace: %q", path, b[:min(len(b), 16)])
	}
}

// TestStopWithoutTrigger: no file when nothing asked for one.
func TestStopWithoutTrigger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.trace")
	r, err := Start(path, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop() {
		t.Fatal("Stop reported a trigger")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a trace was written without a trigger: %v", err)
	}
}

// TestUnwritablePath: a path that cannot be created fails at Start.
func TestUnwritablePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "late.trace")
	if r, err := Start(path, time.Second, nil); err == nil {
		r.Stop()
		t.Fatal("Start accepted a file in a directory that does not exist")
	}
}
