package progress

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/testutil/golden"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sample() Snapshot {
	return Snapshot{
		Elapsed: 75 * time.Second, Total: 3 * time.Minute, Phase: "fault:tax-brownout",
		Faults: []string{"tax-brownout"},
		Streams: []load.StreamLive{
			{Stream: "card-auth", State: "running", AchievedRate: 1398.6, IntendedRate: 1400, P99: 41300 * time.Microsecond,
				Requests: 6993, Failures: 7, ErrorRate: 0.001, InFlight: 12},
			{Stream: "tax", State: "running", AchievedRate: 150, IntendedRate: 150, P99: 8 * time.Second,
				Requests: 750, Failures: 750, ErrorRate: 1, InFlight: 1200, Late: 3},
			{Stream: "later", State: "pending"},
		},
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got), *update)
}

func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, false, time.Hour)
	p.Update(sample())
	s := sample()
	s.Faults, s.Phase = nil, "recovery:tax-brownout"
	p.Update(s)
	if strings.Contains(buf.String(), "\x1b") {
		t.Fatal("escape codes in plain output")
	}
	checkGolden(t, "plain.golden", buf.String())
}

func TestTerminalBlockRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, true, time.Hour)
	p.Update(sample())
	first := buf.Len()
	if strings.Contains(buf.String(), "\x1b[5A") {
		t.Fatal("first draw moved the cursor up")
	}
	p.Update(sample())
	second := buf.String()[first:]
	if !strings.HasPrefix(second, "\x1b[5A") {
		t.Fatalf("second draw does not return to the block's top: %q", second[:10])
	}
	checkGolden(t, "block.golden", strings.Join(Block(sample()), "\n")+"\n")
}

func TestRunDrawsUntilCancelled(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, false, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	done := make(chan struct{})
	go func() {
		p.Run(ctx, func() Snapshot {
			n++
			if n == 3 {
				cancel()
			}
			return Snapshot{Elapsed: time.Duration(n) * time.Second}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if lines := strings.Count(buf.String(), "\n"); lines < 3 {
		t.Fatalf("%d lines", lines)
	}
}
