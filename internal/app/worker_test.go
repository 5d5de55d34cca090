package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/workers"
)

// TestWorkerCommand: worker 1 of 2 reads its spec and index from the
// environment, sends its half of a 40/s, 1 s stream and writes the
// journal's lines: ready, its seconds (20 intended), done.
func TestWorkerCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	spec := workers.Spec{RunID: "w1", Workers: 2, Start: time.Now().Add(300 * time.Millisecond), Streams: []scenario.Stream{{
		Name:     "s",
		Targets:  []scenario.Target{{URL: srv.URL}},
		Rate:     &scenario.Rate{Freq: 40, Per: time.Second},
		Duration: scenario.Duration{Duration: time.Second},
		Timeout:  scenario.Duration{Duration: time.Second},
	}}}
	env, err := spec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	g := &Globals{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		return map[string]string{workers.EnvSpec: env, workers.EnvIndex: "1"}[k]
	}}
	if err := Run(context.Background(), g, []string{"worker"}); err != nil {
		t.Fatalf("drill worker: %v\n%s", err, errOut.String())
	}
	var events []string
	var intended, requests int64
	err = measure.ReadJournal(strings.NewReader(out.String()), measure.JournalReader{
		Second: func(stream string, b *measure.Bucket) error {
			intended += b.Intended
			requests += b.Requests
			return nil
		},
		Data: func(kind string, data json.RawMessage) error {
			var s workers.Status
			if err := json.Unmarshal(data, &s); err != nil {
				return err
			}
			if s.Event != workers.EventAlive {
				events = append(events, s.Event)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatalf("read output: %v\n%s", err, out.String())
	}
	if intended != 20 || requests != 20 {
		t.Errorf("intended %d, requests %d; want 20 each (half of 40)", intended, requests)
	}
	if got := strings.Join(events, ","); got != "ready,done" {
		t.Errorf("worker events %q, want ready,done", got)
	}
}

func TestWorkerCommandBadInput(t *testing.T) {
	good, _ := workers.Spec{RunID: "w", Workers: 2, Start: time.Now(), Streams: []scenario.Stream{{Name: "s"}}}.Encode()
	tests := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"no spec", nil, nil},
		{"bad json", map[string]string{workers.EnvSpec: "{"}, nil},
		{"no index", map[string]string{workers.EnvSpec: good}, nil},
		{"index out of range", map[string]string{workers.EnvSpec: good, workers.EnvIndex: "2"}, nil},
		{"flag out of range", map[string]string{workers.EnvSpec: good}, []string{"--index", "5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			g := &Globals{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return tc.env[k] }}
			err := Run(context.Background(), g, append([]string{"worker"}, tc.args...))
			if got := exitcode.Code(err); got != exitcode.BadInput {
				t.Errorf("exit %d (%v), want %d", got, err, exitcode.BadInput)
			}
		})
	}
}
