package localenv

import (
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// TestProxyRemoveEndpoint: a removed endpoint gets no more requests and
// EndpointRemoved is emitted once; removing an unknown pod does nothing.
func TestProxyRemoveEndpoint(t *testing.T) {
	log := &event.Log{}
	p := newTestProxy(t, log)
	p.SetEndpoint("a", "127.0.0.1:1", 0, true)
	p.SetEndpoint("b", "127.0.0.1:2", 1, false)
	p.RemoveEndpoint("a")
	p.RemoveEndpoint("a")
	p.RemoveEndpoint("nope")
	p.RemoveEndpoint("b")
	if n := len(*p.ready.Load()); n != 0 {
		t.Errorf("%d endpoints still routed", n)
	}
	var got []string
	for _, e := range log.Events() {
		got = append(got, string(e.Kind)+" "+e.Pod)
	}
	want := "endpoint-ready a\nendpoint-removed a\nendpoint-removed b"
	if strings.Join(got, "\n") != want {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}

// TestReplicaLastTerminated: a container that exits by itself reports
// StartedAt while it runs and, once restarted, LastTerminated with the
// kubelet's reason and exit code.
func TestReplicaLastTerminated(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "term", Replicas: 1, Env: map[string]string{"EXIT_AFTER": "300ms"},
		Options: Options{BackoffBase: time.Hour}})
	h.waitEvents("restart", 1, isKind(event.ContainerRestart, "term-0"))
	deadline := time.Now().Add(waitLong)
	for {
		st := h.svc.Status()[0]
		if st.LastTerminated != nil && st.RestartCount >= 1 {
			lt := st.LastTerminated
			if lt.ExitCode != 3 || lt.Reason != "Error" || lt.Signal != 0 || !strings.Contains(lt.Message, "exited with code 3") {
				t.Errorf("LastTerminated %+v, want exit code 3, reason Error", lt)
			}
			if lt.StartedAt.IsZero() || lt.FinishedAt.Before(lt.StartedAt) {
				t.Errorf("times: last %s..%s", lt.StartedAt, lt.FinishedAt)
			}
			if st.PID != 0 && st.StartedAt.Before(lt.FinishedAt) {
				t.Errorf("running since %s, before the last instance finished at %s", st.StartedAt, lt.FinishedAt)
			}
			if st.PID == 0 && !st.StartedAt.IsZero() {
				t.Errorf("no process runs, yet StartedAt is %s", st.StartedAt)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no restarted status with LastTerminated: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
