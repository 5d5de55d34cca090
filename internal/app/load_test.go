package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/measure"
)

func TestLoadCommandFlags(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	save := filepath.Join(t.TempDir(), "series.json")
	var out, errOut bytes.Buffer
	g := &Globals{Stdout: &out, Stderr: &errOut}
	err := Run(context.Background(), g, []string{"load", "--url", srv.URL + "/ok", "--url", srv.URL + "/bad",
		"--rate", "20/s", "--duration", "1s", "--progress", "-1s", "--late", "500ms", "--late-fraction", "0.5", "--save", save})
	if err != nil {
		t.Fatalf("drill load: %v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "p99") {
		t.Fatalf("summary:\n%s", out.String())
	}
	fields := strings.Fields(lines[1])
	if fields[0] != "load" || fields[1] != "20" || !strings.Contains(lines[1], "10 (503:10)") {
		t.Fatalf("summary line %q", lines[1])
	}
	data, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	var series map[string]*measure.Series
	if err := json.Unmarshal(data, &series); err != nil {
		t.Fatal(err)
	}
	if got := series["load"].Total().Requests; got != 20 {
		t.Fatalf("saved series has %d requests", got)
	}
}

func TestLoadCommandBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"load"},
		{"load", "--url", "http://127.0.0.1:1", "--rate", "fast"},
		{"load", "--url", "/relative"},
		{"load", "--url", "http://127.0.0.1:1", "-H", "nocolon"},
		{"load", "--url", "http://127.0.0.1:1", "--rate", "0/s"},
	} {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), &Globals{Stdout: &out, Stderr: &errOut}, args)
		if exitcode.Code(err) != exitcode.BadInput {
			t.Errorf("%v: err %v (code %d), want exit 2", args, err, exitcode.Code(err))
		}
		// Flag mode names flags, not scenario keys.
		if err != nil && strings.Contains(err.Error(), "maxWorkers") {
			t.Errorf("%v: error names the scenario key: %v", args, err)
		}
	}
}

// TestLoadConnectionRefusedIsInvalid: drill load against a port where
// nothing listens gets no answer at all (100 % connection refused); its
// measurement says nothing about a server, so it exits 4 naming the stream
// and the share, not 0.
func TestLoadConnectionRefusedIsInvalid(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()
	var out, errOut bytes.Buffer
	err = Run(context.Background(), &Globals{Stdout: &out, Stderr: &errOut},
		[]string{"load", "--url", closed, "--rate", "20/s", "--duration", "1s", "--progress", "-1s", "--late", "500ms", "--late-fraction", "0.5"})
	if exitcode.Code(err) != exitcode.InvalidMeasurement {
		t.Fatalf("err %v (exit %d), want exit 4", err, exitcode.Code(err))
	}
	for _, want := range []string{"stream load failed at connection level on 100.0% of its requests (20/20: connection-refused 20)", "above its bound of 50.0%"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestTraceLate: with the hidden --trace-late flag, a stream that falls
// behind its schedule leaves a Go execution trace of drill in the file;
// one that keeps it leaves none.
func TestTraceLate(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(10 * time.Millisecond)
		}
	}))
	defer slow.Close()
	for _, tc := range []struct {
		name, path string
		workers    string
		want       bool
	}{
		{"behind", "/slow", "1", true},
		{"on schedule", "/fast", "0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "late.trace")
			var out, errOut bytes.Buffer
			_ = Run(context.Background(), &Globals{Stdout: &out, Stderr: &errOut},
				[]string{"--trace-late", file, "load", "--url", slow.URL + tc.path, "--rate", "200/s", "--duration", "1s",
					"--max-workers", tc.workers, "--timeout", "1s", "--progress", "-1s", "--late", "50ms"})
			b, err := os.ReadFile(file)
			switch {
			case tc.want && err != nil:
				t.Fatalf("no trace written: %v (stderr: %s)", err, errOut.String())
			case tc.want && !bytes.HasPrefix(b, []byte("go 1.")):
				t.Fatalf("%s is not a Go execution trace", file)
			case !tc.want && err == nil:
				t.Fatalf("a trace was written although the stream kept its schedule")
			}
		})
	}
}
