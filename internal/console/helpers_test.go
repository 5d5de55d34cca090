package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/runner"
	"github.com/drillhq/drill/internal/scenario"
)

// drill is a short real drill with its console, run in the background.
type drill struct {
	srv    *Server
	outDir string
	done   chan outcome
	cancel context.CancelFunc
}

type outcome struct {
	res runner.Result
	err error
}

// startDrill binds a console on loopback and runs the scenario file (in
// testdata) with it; the console is closed when the test ends.
func startDrill(t *testing.T, file string, opts Options) *drill {
	t.Helper()
	return runDrill(t, file, opts, false)
}

// startDrillClosing is startDrill with the console closed as soon as the
// run is over, as `drill run --ui` without --ui-linger does.
func startDrillClosing(t *testing.T, file string, opts Options) *drill {
	t.Helper()
	return runDrill(t, file, opts, true)
}

func runDrill(t *testing.T, file string, opts Options, closeOnEnd bool) *drill {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("testdata", file))
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	srv, err := Listen(opts)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	d := &drill{srv: srv, outDir: filepath.Join(dir, "out"), done: make(chan outcome, 1), cancel: cancel}
	go func() {
		res, err := runner.Run(ctx, runner.Options{
			Scenario: sc,
			OutDir:   d.outDir,
			StateDir: filepath.Join(dir, "state"),
			Stdout:   io.Discard,
			OnLive:   srv.Attach,
		})
		srv.Finish(res, err)
		if closeOnEnd {
			cctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
			_ = srv.Close(cctx)
			stop()
		}
		d.done <- outcome{res, err}
	}()
	t.Cleanup(func() {
		cancel()
		ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = srv.Close(ctx)
	})
	return d
}

// wait returns the run's outcome (generous bound: bring-up plus a
// 9 s timeline on a busy machine).
func (d *drill) wait(t *testing.T) outcome {
	t.Helper()
	select {
	case o := <-d.done:
		return o
	case <-time.After(90 * time.Second):
		t.Fatal("the drill did not end within 90 s")
		return outcome{}
	}
}

func (d *drill) url(path string) string { return strings.TrimSuffix(d.srv.URL(), "/") + path }

// do sends a request with the token (token "" sends none) and returns the
// status and body.
func (d *drill) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.url(path), rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sse is a client of GET /api/events.
type sse struct {
	msgs chan sseMsg
}

type sseMsg struct {
	name string
	data []byte
}

func (d *drill) events(t *testing.T) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url("/api/events"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.srv.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/events: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET /api/events: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &sse{msgs: make(chan sseMsg, 4096)}
	go func() {
		defer resp.Body.Close()
		defer close(s.msgs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				m.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				m.data = []byte(strings.TrimPrefix(line, "data: "))
			case line == "" && m.name != "":
				s.msgs <- m
				m = sseMsg{}
			}
		}
	}()
	return s
}

// waitFor reads messages until match accepts one; it fails the test after
// limit or when the stream ends.
func (s *sse) waitFor(t *testing.T, what string, limit time.Duration, match func(sseMsg) bool) sseMsg {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatalf("event stream ended while waiting for %s", what)
			}
			if match(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s within %s", what, limit)
		}
	}
}

// isEvent matches a timeline event of kind (and fault, when not "").
func isEvent(kind event.Kind, fault string) func(sseMsg) bool {
	return func(m sseMsg) bool {
		if m.name == "hello" {
			var h StateResponse
			if err := json.Unmarshal(m.data, &h); err != nil {
				return false
			}
			for _, e := range h.Events {
				if e.Kind == kind && (fault == "" || e.Fault == fault) {
					return true
				}
			}
			return false
		}
		if m.name != "event" {
			return false
		}
		var e event.Event
		if err := json.Unmarshal(m.data, &e); err != nil {
			return false
		}
		return e.Kind == kind && (fault == "" || e.Fault == fault)
	}
}
