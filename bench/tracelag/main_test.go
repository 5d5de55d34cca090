package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// TestAnalyseFindsTheDispatchPath: in a trace of a short vegeta attack,
// tracelag finds the pacer, its time asleep, and a hand-off per hit.
func TestAnalyseFindsTheDispatchPath(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot trace (another trace running?): %v", err)
	}
	atk := vegeta.NewAttacker()
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: "GET", URL: srv.URL})
	n := 0
	for range atk.Attack(tr, vegeta.Rate{Freq: 100, Per: time.Second}, 200*time.Millisecond, "t") {
		n++
	}
	trace.Stop()
	bins, err := analyse(&buf, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var handoffs int
	var sleep time.Duration
	for _, b := range bins {
		handoffs += len(b.handoffs)
		sleep += b.pacer["sleep"]
	}
	if handoffs == 0 || handoffs > n || sleep < 50*time.Millisecond {
		t.Fatalf("%d hand-offs for %d hits, pacer asleep %s; want some hand-offs and most of 200 ms asleep", handoffs, n, sleep)
	}
	var out strings.Builder
	write(&out, bins, 50*time.Millisecond)
	if !strings.Contains(out.String(), "hand-offs: ") {
		t.Fatalf("no summary line:\n%s", out.String())
	}
}

// TestAnalyseRejectsOtherFiles: a file that is not a trace, or a trace
// without a load generator, is an error.
func TestAnalyseRejectsOtherFiles(t *testing.T) {
	if _, err := analyse(strings.NewReader("not a trace"), time.Second); err == nil {
		t.Fatal("a text file was accepted")
	}
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot trace: %v", err)
	}
	time.Sleep(time.Millisecond)
	trace.Stop()
	if _, err := analyse(&buf, time.Second); err == nil || !strings.Contains(err.Error(), "no vegeta pacer") {
		t.Fatalf("err %v, want no pacer", err)
	}
}
