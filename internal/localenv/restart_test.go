package localenv

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRestartPolicy: a container that exits is restarted or not as its
// restartPolicy says; one that is not leaves the replica finished (done,
// state terminated, its exit code in LastTerminated), and Output holds
// only the process's own lines, whole, stdout's and stderr's apart.
func TestRestartPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy       string
		exit         string
		wantFinished bool
		wantCode     int32
	}{
		{RestartNever, "0", true, 0},
		{RestartNever, "3", true, 3},
		{RestartOnFailure, "0", true, 0},
		{RestartOnFailure, "3", false, 0},
		{RestartAlways, "0", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.policy+"-exit"+tc.exit, func(t *testing.T) {
			t.Parallel()
			var out syncBuffer
			// Both streams write many long lines at once: whole lines must
			// come out, never one cut by the other.
			script := `i=0; while [ $i -lt 200 ]; do echo "out-$i-` + strings.Repeat("o", 3000) + `"; echo "err-$i-` + strings.Repeat("e", 3000) + `" >&2; i=$((i+1)); done; exit ` + tc.exit
			r, err := NewReplica(ReplicaConfig{
				Pod: "job-0", Command: []string{"sh", "-c", script}, Port: 1,
				Clock: event.NewClock(), RestartPolicy: tc.policy, Output: &out,
				Options: Options{BackoffBase: time.Hour},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = r.Stop(ctx)
			}()
			if tc.wantFinished {
				select {
				case <-r.Done():
				case <-time.After(waitLong):
					t.Fatalf("replica not done after %s: %+v", waitLong, r.Status())
				}
				st := r.Status()
				if !st.Finished || st.State != StateTerminated || st.LastTerminated == nil || st.LastTerminated.ExitCode != tc.wantCode || st.RestartCount != 0 {
					t.Fatalf("status %+v (last %+v), want finished, terminated, exit code %d, no restart", st, st.LastTerminated, tc.wantCode)
				}
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				if len(lines) != 400 {
					t.Fatalf("output has %d lines, want 400", len(lines))
				}
				for i, l := range lines {
					if len(l) < 3000 || (!strings.HasPrefix(l, "out-") && !strings.HasPrefix(l, "err-")) || strings.Contains(l, "[drill]") ||
						(strings.HasPrefix(l, "out-") && strings.Contains(l, "e")) || (strings.HasPrefix(l, "err-") && strings.Contains(l, "o")) {
						t.Fatalf("output line %d is not one whole line of one stream: %.80q", i, l)
					}
				}
				return
			}
			deadline := time.Now().Add(waitLong)
			for r.Status().LastTerminated == nil {
				if time.Now().After(deadline) {
					t.Fatalf("the container did not end: %+v", r.Status())
				}
				time.Sleep(20 * time.Millisecond)
			}
			select {
			case <-r.Done():
				t.Fatalf("replica done, want it waiting to restart: %+v", r.Status())
			case <-time.After(200 * time.Millisecond):
			}
			if st := r.Status(); st.Finished || st.State != StateWaiting {
				t.Errorf("status %+v, want waiting to restart, not finished", st)
			}
		})
	}
}

// TestRestartPolicyRefused: an unknown restart policy is refused.
func TestRestartPolicyRefused(t *testing.T) {
	_, err := NewReplica(ReplicaConfig{Pod: "p", Command: []string{"true"}, Port: 1, Clock: event.NewClock(), RestartPolicy: "Sometimes"})
	if err == nil || !strings.Contains(err.Error(), "restartPolicy") {
		t.Fatalf("err = %v, want restartPolicy refused", err)
	}
}
