package inject

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil"
)

// eventuallyStopped waits (up to 10s) until every process of the group's
// tree is in state want (stopped or not): signal delivery is asynchronous.
func eventuallyStopped(t *testing.T, pgid int, want bool) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := allStopped(t, pgid)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allStopped(t *testing.T, pgid int) bool {
	t.Helper()
	procs, err := proctree.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := proctree.Tree(pgid)
	for _, pid := range tree {
		if procs[pid].State != 'T' && procs[pid].State != 't' {
			return false
		}
	}
	return len(tree) > 0
}

func TestProcessPauseStopsAndResumesPostgres(t *testing.T) {
	pg := testutil.Postgres(t)
	env, _ := testEnv(t, nil)
	env.Processes = map[string]int{"pg": pg.PGID}
	held := mustConnect(t, pg, pg.Addr)
	roundTrip(t, held)

	var stack Stack
	rev := inject(t, scenario.Fault{Name: "freeze", Type: scenario.FaultProcessPause, Dependency: "pg"}, env)
	stack.Push("freeze", rev)
	if !eventuallyStopped(t, pg.PGID, true) {
		t.Fatal("not every process of the cluster is stopped")
	}
	done := requireQueryHangs(t, held, "on a frozen server")

	// The run is interrupted (Ctrl-C): the stack reverts with a cancelled ctx.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := stack.RevertAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitHeldQuery(t, done, "SIGCONT"); err != nil { // unlike a timeout toxic, the held connection survives
		t.Fatalf("held query failed after resume: %v", err)
	}
	if eventuallyStopped(t, pg.PGID, false) {
		t.Fatal("cluster still stopped")
	}
	roundTrip(t, mustConnect(t, pg, pg.Addr))
	assertClean(t, nil, env)
}

func TestCleanupAfterKilledRun(t *testing.T) {
	pg := testutil.Postgres(t)
	tp := startRemoteServer(t)
	pauseProxy, pauseAddr := pgProxy(t, tp, pg)
	downProxy, downAddr := pgProxy(t, tp, pg)
	env, state := testEnv(t, tp)
	env.Processes = map[string]int{"pg": pg.PGID}

	// A run applies three faults and is SIGKILLed: no revert runs.
	inject(t, scenario.Fault{Name: "pause", Type: scenario.FaultTimeout, Proxy: pauseProxy, Stream: "both", Timeout: dur(0)}, env)
	inject(t, scenario.Fault{Name: "down", Type: scenario.FaultDown, Proxy: downProxy}, env)
	inject(t, scenario.Fault{Name: "freeze", Type: scenario.FaultProcessPause, Dependency: "pg"}, env)
	env.Journal.Close()
	// Another run's toxic that no journal here knows about.
	other := ToxicName("20260101.000000.abcdef", "x", "")
	if err := tp.AddToxic(context.Background(), pauseProxy, Toxic{Name: other, Type: "latency", Stream: "downstream", Toxicity: 1,
		Attributes: map[string]any{"latency": 1}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	left, err := Leftovers(ctx, tp)
	if err != nil || len(left) != 3 {
		t.Fatalf("Leftovers = %v %v, want 3 toxics", left, err)
	}
	if left[0].RunID != "20260101.000000.abcdef" || left[1].RunID != env.RunID {
		t.Fatalf("leftover runs not sorted/parsed: %+v", left)
	}

	rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: env.RunID})
	if err != nil {
		t.Fatalf("Cleanup: %v (report %+v)", err, rep)
	}
	if len(rep.Removed) != 4 { // 2 toxics, 1 proxy, 1 process group
		t.Fatalf("removed %v", rep.Removed)
	}
	if eventuallyStopped(t, pg.PGID, false) {
		t.Fatal("postgres still stopped after cleanup")
	}
	for _, addr := range []string{pauseAddr, downAddr} {
		c := mustConnect(t, pg, addr)
		if rtt := minRoundTrip(t, c, 3); rtt > 200*time.Millisecond {
			t.Fatalf("round trip via %s after cleanup %v", addr, rtt)
		}
	}
	// Only the other run's toxic remains; a sweep of every run removes it.
	left, _ = Leftovers(ctx, tp)
	if len(left) != 1 || left[0].Toxic != other {
		t.Fatalf("after run cleanup: %v", left)
	}
	rep, err = Cleanup(ctx, CleanupOptions{StateDir: state, Toxiproxy: tp})
	if err != nil || len(rep.Removed) != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if left, _ = Leftovers(ctx, tp); len(left) != 0 {
		t.Fatalf("after sweep: %v", left)
	}
	entries, _ := ReadJournal(JournalPath(state, env.RunID))
	if p := Pending(entries); len(p) != 0 {
		t.Fatalf("journal pending after cleanup: %+v", p)
	}
	// Idempotent.
	rep, err = Cleanup(ctx, CleanupOptions{StateDir: state, Toxiproxy: tp})
	if err != nil || len(rep.Removed)+len(rep.Failed) != 0 {
		t.Fatalf("second cleanup: %+v %v", rep, err)
	}
}

func TestCleanupEmbeddedRunIsGone(t *testing.T) {
	e, err := NewEmbedded(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if _, err := e.CreateProxy(context.Background(), "svc", "", up.Addr().String()); err != nil {
		t.Fatal(err)
	}
	env, state := testEnv(t, e)
	inject(t, scenario.Fault{Name: "slow", Type: scenario.FaultLatency, Proxy: "svc", Latency: dur(time.Second)}, env)
	e.Close() // the process that embedded it died
	rep, err := Cleanup(context.Background(), CleanupOptions{StateDir: state})
	if err != nil || len(rep.Gone) != 1 || len(rep.Removed) != 0 {
		t.Fatalf("cleanup of a dead embedded run: %+v %v", rep, err)
	}
}

func TestCheckOnPath(t *testing.T) {
	pg := testutil.Postgres(t)
	modes(t, func(t *testing.T, tp Toxiproxy) {
		proxy, addr := pgProxy(t, tp, pg)
		// Fresh connections: a remote server counts their bytes at close.
		query := func(addr string) Drive {
			return func(ctx context.Context) (time.Duration, error) {
				start := time.Now()
				c, err := connectVia(ctx, pg, addr)
				if err != nil {
					return 0, err
				}
				defer c.Close(ctx)
				_, err = c.Exec(ctx, "SELECT 1")
				return time.Since(start), err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// No run id: the counters alone decide.
		if err := CheckOnPath(ctx, tp, proxy, query(addr), OnPathOptions{}); err != nil {
			t.Fatalf("traffic through the proxy: %v", err)
		}
		// Let the first drive's closing bytes pass before counting again.
		settle(t, tp, proxy)
		err := CheckOnPath(ctx, tp, proxy, query(pg.Addr), OnPathOptions{})
		if !errors.Is(err, ErrNotOnPath) {
			t.Fatalf("traffic around the proxy: want ErrNotOnPath, got %v", err)
		}
		t.Log(err)
	})
}

// settle waits until the proxy's counters stop moving for 300ms.
func settle(t *testing.T, tp Toxiproxy, proxy string) {
	t.Helper()
	last, stableSince := int64(-1), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		c, err := tp.Counters(context.Background(), proxy)
		if err != nil {
			t.Fatal(err)
		}
		if c.Total() != last {
			last, stableSince = c.Total(), time.Now()
		} else if time.Since(stableSince) > 300*time.Millisecond {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("proxy counters never settled")
}

func TestEnsureProxy(t *testing.T) {
	modes(t, func(t *testing.T, tp Toxiproxy) {
		up, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer up.Close()
		env, _ := testEnv(t, tp)
		var stack Stack
		ctx := context.Background()
		name := fmt.Sprintf("svc-%d", time.Now().UnixNano())
		info, err := EnsureProxy(ctx, tp, env.RunID, scenario.Proxy{Name: name, Upstream: up.Addr().String()}, env.Journal, &stack)
		if err != nil || info.Listen == "" || strings.HasSuffix(info.Listen, ":0") {
			t.Fatalf("create: %+v %v", info, err)
		}
		again, err := EnsureProxy(ctx, tp, env.RunID, scenario.Proxy{Name: name}, env.Journal, &stack)
		if err != nil || again.Listen != info.Listen {
			t.Fatalf("adopt: %+v %v", again, err)
		}
		// The scenario default listen 127.0.0.1:0 (and any port 0) means
		// "any address": it adopts the proxy wherever it listens.
		for _, listen := range []string{"127.0.0.1:0", ":0", "0.0.0.0:0", info.Listen} {
			got, err := EnsureProxy(ctx, tp, env.RunID, scenario.Proxy{Name: name, Listen: listen, Upstream: up.Addr().String()}, env.Journal, &stack)
			if err != nil || got.Listen != info.Listen {
				t.Fatalf("adopt with listen %q: %+v %v", listen, got, err)
			}
		}
		if _, err := EnsureProxy(ctx, tp, env.RunID, scenario.Proxy{Name: name, Listen: "127.0.0.1:1"}, env.Journal, &stack); err == nil ||
			!strings.Contains(err.Error(), "listening on") {
			t.Fatalf("mismatched listen accepted: %v", err)
		}
		if _, err := EnsureProxy(ctx, tp, env.RunID, scenario.Proxy{Name: name, Upstream: "127.0.0.1:1"}, env.Journal, &stack); err == nil ||
			!strings.Contains(err.Error(), "upstream") {
			t.Fatalf("mismatched upstream accepted: %v", err)
		}
		if err := stack.RevertAll(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := tp.Proxy(ctx, name); !errors.Is(err, ErrProxyNotFound) {
			t.Fatalf("proxy still there after RevertAll: %v", err)
		}
		assertClean(t, tp, env)
	})
}

// TestCleanupProcessPauseLeaderGone: a run SIGKILLed during a process pause
// of PostgreSQL; the postmaster (group leader) dies with it (parent-death
// signal), its children stay stopped in their own sessions. The journal
// names every stopped process with its start time, so Cleanup continues
// them, and they exit by themselves on seeing the postmaster gone.
func TestCleanupProcessPauseLeaderGone(t *testing.T) {
	pg := testutil.Postgres(t)
	held := mustConnect(t, pg, pg.Addr) // one backend more in the tree
	roundTrip(t, held)
	env, state := testEnv(t, nil)
	env.Processes = map[string]int{"pg": pg.PGID}
	inject(t, scenario.Fault{Name: "freeze", Type: scenario.FaultProcessPause, Dependency: "pg"}, env)
	env.Journal.Close()

	entries, err := ReadJournal(JournalPath(state, env.RunID))
	if err != nil {
		t.Fatal(err)
	}
	p := Pending(entries)
	if len(p) != 1 || len(p[0].Procs) < 3 {
		t.Fatalf("pending %+v, want one process pause naming the postmaster and its children", p)
	}
	procs := p[0].Procs
	t.Cleanup(func() { // whatever happens, nothing stays stopped
		for _, id := range procs {
			if proctree.Same(id) {
				_ = syscall.Kill(id.PID, syscall.SIGKILL)
			}
		}
	})
	for _, id := range procs {
		if id.Start == 0 {
			t.Fatalf("process %d journaled without its start time", id.PID)
		}
	}
	if !eventuallyStopped(t, pg.PGID, true) {
		t.Fatal("cluster not stopped")
	}
	// The postmaster dies as with drill SIGKILLed.
	if err := syscall.Kill(pg.PGID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var children []proctree.ID
	for _, id := range procs {
		if id.PID != pg.PGID {
			children = append(children, id)
		}
	}
	waitFor(t, "postmaster gone", func() bool { return !proctree.Alive(pg.PGID) })
	// A child that had already exited when the pause came (a backend or
	// worker ending as the postmaster froze) stays a zombie, now of PID 1,
	// until PID 1 reaps it and it is gone: either way it is no longer the
	// journaled process and nothing can continue it. (A stopped process
	// cannot exit, so one that is gone had exited before the pause.)
	// Every other child must still be stopped, and at least the held
	// connection's backend is one of those.
	var stopped []proctree.ID
	for _, id := range children {
		pr, err := proctree.Read(id.PID)
		switch {
		case err == nil && pr.State == 'Z', errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil || pr.State != 'T':
			t.Fatalf("child %d before cleanup: %+v %v; want stopped", id.PID, pr, err)
		}
		stopped = append(stopped, id)
	}
	if len(stopped) == 0 {
		t.Fatal("no child of the dead postmaster is stopped; the test proves nothing")
	}
	children = stopped

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: env.RunID})
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0].Kind != KindProcessPause {
		t.Fatalf("Cleanup = %+v, %v; want the process pause removed", rep, err)
	}
	waitFor(t, "children of the dead postmaster exited", func() bool {
		for _, id := range children {
			if proctree.Same(id) {
				return false
			}
		}
		return true
	})
	entries, _ = ReadJournal(JournalPath(state, env.RunID))
	if p := Pending(entries); len(p) != 0 {
		t.Fatalf("journal pending after cleanup: %+v", p)
	}
	// Again: nothing left, the journal entry is closed.
	if rep, err := Cleanup(ctx, CleanupOptions{StateDir: state, RunID: env.RunID}); err != nil || len(rep.Removed)+len(rep.Gone) != 0 {
		t.Fatalf("second cleanup: %+v %v", rep, err)
	}
}

// waitFor polls cond every 20 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}
