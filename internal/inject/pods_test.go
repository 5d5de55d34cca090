package inject

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// podServerEnv switches the test binary into podServer.
const podServerEnv = "DRILL_INJECT_PODSERVER"

// podServer is a replica for the pod fault tests: it serves "ok" on
// 127.0.0.1:$PORT and exits on SIGTERM.
func podServer() int {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		<-ch
		os.Exit(0)
	}()
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// startPods runs n replicas of podServer as local service name, stopped
// at the end of the test.
func startPods(t *testing.T, name string, n int) (*localenv.Service, *event.Log) {
	t.Helper()
	log := &event.Log{}
	svc, err := localenv.Start(context.Background(), event.NewClock(), log, localenv.ServiceSpec{
		Name: name, Command: []string{testproc.Executable(t)}, Replicas: n, Grace: 2 * time.Second,
		Env:    map[string]string{podServerEnv: "1"},
		Probes: scenario.Probes{ReadinessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/"}, PeriodSeconds: 1}},
		LogDir: t.TempDir(),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := svc.WaitReady(ctx, n); err != nil {
		t.Fatal(err)
	}
	return svc, log
}

func TestChoosePods(t *testing.T) {
	t.Parallel()
	live := []string{"api-0", "api-1", "api-2", "api-3"}
	for _, c := range []struct {
		name string
		live []string
		n    int
		seed int64
		want []string
	}{
		{"one of four, seed 7", live, 1, 7, ChoosePods(live, 1, 7)},
		{"all when n is the count", live, 4, 1, live},
		{"all when n is above it", live, 9, 1, live},
		{"none for 0", live, 0, 1, []string{}},
		{"none of none", nil, 2, 1, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := ChoosePods(c.live, c.n, c.seed)
			if !slices.Equal(got, c.want) {
				t.Errorf("ChoosePods(%v, %d, %d) = %v, want %v", c.live, c.n, c.seed, got, c.want)
			}
		})
	}
	// The same seed gives the same choice; the choice keeps slot order and
	// has no repeats; seeds between them choose every pod.
	seen := map[string]bool{}
	for seed := range int64(64) {
		a, b := ChoosePods(live, 2, seed), ChoosePods(live, 2, seed)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d chose %v then %v", seed, a, b)
		}
		if len(a) != 2 || a[0] >= a[1] {
			t.Fatalf("seed %d chose %v: want two pods in slot order", seed, a)
		}
		for _, p := range a {
			seen[p] = true
		}
	}
	if len(seen) != len(live) {
		t.Errorf("64 seeds chose only %v", seen)
	}
}

func TestResolveNamed(t *testing.T) {
	t.Parallel()
	live := []string{"api-0", "api-1-r2", "api-2"}
	got, err := resolveNamed([]string{"api-1", "api-2"}, live)
	if err != nil || !slices.Equal(got, []string{"api-1-r2", "api-2"}) {
		t.Errorf("resolveNamed = %v, %v; want the slot's live pods", got, err)
	}
	if _, err := resolveNamed([]string{"api-3"}, live); err == nil || !strings.Contains(err.Error(), "live: api-0, api-1-r2, api-2") {
		t.Errorf("resolveNamed of a pod with no slot: %v", err)
	}
}

// TestPodKill deletes one of three real replicas chosen with a seed: the
// chosen pod is replaced in its slot, the journal names the service, the
// pod, the seed and the processes before anything is ended, and the
// revert waits for the pod to be gone and closes the entry.
func TestPodKill(t *testing.T) {
	t.Parallel()
	svc, evlog := startPods(t, "api", 3)
	env, _ := testEnv(t, nil)
	env.Services = map[string]PodSet{"api": svc}
	f := scenario.Fault{Name: "kill", Type: scenario.FaultPodKill, Service: "api", Count: ptr(1), Seed: ptr(int64(7)),
		Signal: scenario.SignalKill, At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}
	inj, err := Build(f, env)
	if err != nil {
		t.Fatal(err)
	}
	want := ChoosePods([]string{"api-0", "api-1", "api-2"}, 1, 7)
	if d := inj.(Describer).Describe(); !strings.Contains(d, "seed 7") || !strings.Contains(d, "SIGKILL") {
		t.Errorf("Describe = %q", d)
	}
	revert, err := inj.Inject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ReadJournal(env.Journal.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || entries[0].Kind != KindLocalPods || entries[0].Service != "api" || entries[0].Replicas != 3 ||
		!slices.Equal(entries[0].Pods, want) || entries[0].Seed == nil || *entries[0].Seed != 7 || len(entries[0].Procs) != 3 {
		t.Fatalf("first journal entry %+v, want the service, its 3 processes, pods %v and seed 7", entries[0], want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := revert(ctx); err != nil {
		t.Fatal(err)
	}
	if p := Pending(mustRead(t, env.Journal.Path())); len(p) != 0 {
		t.Errorf("journal entries still open after the revert: %+v", p)
	}
	live := svc.LivePods()
	if slices.Contains(live, want[0]) || !slices.Contains(live, want[0]+"-r1") || len(live) != 3 {
		t.Errorf("live pods %v: want %s replaced by %s-r1", live, want[0], want[0])
	}
	if err := svc.WaitReady(ctx, 3); err != nil {
		t.Fatal(err)
	}
	var killing bool
	for _, e := range evlog.Events() {
		if e.Kind == event.K8sEvent && e.Reason == "Killing" && e.Pod == want[0] && strings.Contains(e.Detail, "seed 7") {
			killing = true
		}
	}
	if !killing {
		t.Errorf("no Killing event for %s recording the seed", want[0])
	}
}

func mustRead(t *testing.T, path string) []Entry {
	t.Helper()
	e, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRolloutInjector rolls two real replicas with the fault's bounds;
// the revert waits for the rollout and closes the journal entry.
func TestRolloutInjector(t *testing.T) {
	t.Parallel()
	svc, _ := startPods(t, "web", 2)
	env, _ := testEnv(t, nil)
	env.Services = map[string]PodSet{"web": svc}
	one, zero := scenario.IntOrPercent{N: 1}, scenario.IntOrPercent{}
	f := scenario.Fault{Name: "roll", Type: scenario.FaultRollout, Service: "web", MaxSurge: &one, MaxUnavailable: &zero,
		At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}
	inj, err := Build(f, env)
	if err != nil {
		t.Fatal(err)
	}
	if d := inj.(Describer).Describe(); !strings.Contains(d, "maxSurge 1 = 1, maxUnavailable 0 = 0") {
		t.Errorf("Describe = %q", d)
	}
	revert, err := inj.Inject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := revert(ctx); err != nil {
		t.Fatal(err)
	}
	if live := svc.LivePods(); !slices.Equal(live, []string{"web-0-r1", "web-1-r1"}) {
		t.Errorf("live pods after the rollout %v", live)
	}
	if p := Pending(mustRead(t, env.Journal.Path())); len(p) != 0 {
		t.Errorf("journal entries still open after the revert: %+v", p)
	}
}

// TestCleanupAfterKilledPodFault: a run killed mid-fault leaves an open
// local-pods entry. Cleanup ends a journaled process that outlived the
// run (still the same process) and says why the service is not brought
// back here; an entry whose processes are gone is reported gone, with
// the same reason.
func TestCleanupAfterKilledPodFault(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	run := NewRunID(time.Now())
	j, err := OpenJournal(state, run)
	if err != nil {
		t.Fatal(err)
	}
	// A replica that outlived its run: a process group of its own.
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	ids := proctree.IDs([]int{cmd.Process.Pid})
	if len(ids) != 1 {
		t.Fatalf("no process id for %d", cmd.Process.Pid)
	}
	left := Entry{Op: OpApply, Key: KindLocalPods + "/api/kill", Kind: KindLocalPods, Fault: "kill", Service: "api",
		Replicas: 3, Pods: []string{"api-1"}, Procs: ids}
	gone := Entry{Op: OpApply, Key: KindLocalPods + "/web/roll", Kind: KindLocalPods, Fault: "roll", Service: "web",
		Replicas: 2, Procs: []proctree.ID{{PID: ids[0].PID, Start: ids[0].Start + 1}}}
	for _, e := range []Entry{left, gone} {
		if err := j.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	_ = j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process that outlived its run still runs after cleanup")
	}
	if len(rep.Removed) != 1 || rep.Removed[0].Service != "api" ||
		!strings.Contains(rep.Removed[0].String(), "ended pod processes") ||
		!strings.Contains(rep.Removed[0].String(), "its 3 declared replicas start with the next run") {
		t.Errorf("removed %v", rep.Removed)
	}
	if len(rep.Gone) != 1 || rep.Gone[0].Service != "web" || !strings.Contains(rep.Gone[0].String(), "its 2 declared replicas") {
		t.Errorf("gone %v", rep.Gone)
	}
	if p := Pending(mustRead(t, JournalPath(state, run))); len(p) != 0 {
		t.Errorf("open entries after cleanup: %+v", p)
	}
	// Twice is harmless.
	rep, err = Cleanup(ctx, CleanupOptions{StateDir: state, RunID: run})
	if err != nil || len(rep.Removed)+len(rep.Gone)+len(rep.Failed) != 0 {
		t.Errorf("second cleanup: %+v, %v", rep, err)
	}
}

// TestRolloutStoppedAtFaultEnd: a revert whose time runs out stops the
// rollout where it is, says so, and still closes the journal entry.
func TestRolloutStoppedAtFaultEnd(t *testing.T) {
	t.Parallel()
	svc, _ := startPods(t, "slow", 2)
	env, _ := testEnv(t, nil)
	env.Services = map[string]PodSet{"slow": svc}
	one, zero := scenario.IntOrPercent{N: 1}, scenario.IntOrPercent{}
	f := scenario.Fault{Name: "roll", Type: scenario.FaultRollout, Service: "slow", MaxSurge: &one, MaxUnavailable: &zero,
		At: scenario.Duration{Duration: time.Second}, For: scenario.Duration{Duration: time.Second}}
	inj, err := Build(f, env)
	if err != nil {
		t.Fatal(err)
	}
	revert, err := inj.Inject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the fault's end has no time left
	err = revert(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not complete by the fault's end") {
		t.Fatalf("revert = %v, want the rollout stopped", err)
	}
	if p := Pending(mustRead(t, env.Journal.Path())); len(p) != 0 {
		t.Errorf("journal entries still open: %+v", p)
	}
	if err := revert(context.Background()); err != nil {
		t.Errorf("a retry of the revert: %v, want nil (nothing left to undo)", err)
	}
	if live := svc.LivePods(); slices.Equal(live, []string{"slow-0-r1", "slow-1-r1"}) {
		t.Errorf("the rollout completed although it was stopped at once: %v", live)
	}
}
