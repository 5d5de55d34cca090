package refsvc

import (
	"context"
	"testing"
	"time"
)

// TestConnectPacer: a burst goes at once, later set-ups are spaced, and a
// cancelled wait returns the context's error.
func TestConnectPacer(t *testing.T) {
	p := &connectPacer{every: 50 * time.Millisecond, burst: 4}
	ctx := context.Background()
	t0 := time.Now()
	for range 4 {
		if err := p.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(t0); d >= 150*time.Millisecond {
		t.Fatalf("burst of 4 took %s, want at once", d)
	}
	for range 4 {
		if err := p.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(t0); d < 190*time.Millisecond {
		t.Fatalf("4 set-ups past the burst took %s in all, want >= 200ms", d)
	}
	slow := &connectPacer{every: time.Hour, burst: 1}
	if err := slow.wait(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := slow.wait(cctx); err == nil {
		t.Fatal("wait with a cancelled context and no slot free returned nil")
	}
}
