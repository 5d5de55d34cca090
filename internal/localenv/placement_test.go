package localenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/placement"
)

// procNice is field 19 of /proc/<pid>/stat.
func procNice(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// procCgroups is the text of /proc/<pid>/cgroup.
func procCgroups(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplicasArePlaced: every replica of a service, the child it forks,
// and the process that replaces it after a restart run in the replica's
// group: its own cgroup drill-<run>/<service>/<pod> where drill may make
// one, else nice +5. After the service stopped, the run's cgroup can be
// removed (no process of it is left).
func TestReplicasArePlaced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noCgroup string
	}{
		{name: "cgroup"},
		{name: "nice", noCgroup: "cgroups switched off by the test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := placement.Setup(placement.Config{RunID: fmt.Sprintf("rt%d-%s", os.Getpid(), tc.name), Lower: true, NoCgroup: tc.noCgroup})
			if err != nil {
				t.Fatal(err)
			}
			if tc.noCgroup == "" && pl.Cgroup() == "" {
				t.Skipf("no writable cgroup with the cpu controller here: %s (the nice case runs)", pl.Report().NoCgroup)
			}
			// placed checks pid is in pod's group; pod "app-*" is any
			// replica's.
			placed := func(pid int, pod string) {
				t.Helper()
				if tc.noCgroup != "" {
					if n := procNice(t, pid); n != placement.SUTNice {
						t.Errorf("process %d of %s: nice %d, want %d", pid, pod, n, placement.SUTNice)
					}
					return
				}
				want := "/drill-" + fmt.Sprintf("rt%d-%s", os.Getpid(), tc.name) + "/app/" + pod + "\n"
				cg := procCgroups(t, pid)
				if pod == "app-*" {
					want = "/drill-" + fmt.Sprintf("rt%d-%s", os.Getpid(), tc.name) + "/app/app-"
				}
				if !strings.Contains(cg, want) {
					t.Errorf("process %d of %s in cgroups\n%s\nwant one ending in %s", pid, pod, cg, want)
				}
			}
			t.Cleanup(func() {
				// Registered before startService's cleanup, so it runs
				// after the service stopped (cleanups run last first).
				if err := pl.Close(); err != nil {
					t.Errorf("remove the run's cgroup after the service stopped: %v", err)
				}
			})
			h := startService(t, ServiceSpec{Name: "app", Replicas: 2, Placement: pl, Env: map[string]string{"CHILD": "1"}})
			h.waitReady(2)
			for _, st := range h.svc.Status() {
				placed(st.PID, st.Pod)
			}
			h.waitEvents("children started", 2, func(event.Event) bool { return len(h.childPIDs()) >= 2 })
			for _, pid := range h.childPIDs() {
				placed(pid, "app-*")
			}

			h.control("app-1", "exit=3")
			h.waitEvents("app-1 restarted", 2, isKind(event.PodStarted, "app-1"))
			h.waitReady(2)
			for _, st := range h.svc.Status() {
				if st.Pod == "app-1" {
					if st.RestartCount < 1 {
						t.Fatalf("app-1 restart count %d", st.RestartCount)
					}
					placed(st.PID, "app-1")
				}
			}
		})
	}
}
