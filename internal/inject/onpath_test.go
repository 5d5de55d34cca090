package inject

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/testutil"
)

// noCounters hides a server's byte counters, like a toxiproxy-server
// started without -proxy-metrics.
type noCounters struct{ Toxiproxy }

func (noCounters) Counters(context.Context, string) (Counters, error) {
	return Counters{}, ErrCountersUnavailable
}

// pooledDrive runs three SELECT 1 on one held connection (a pool's
// long-lived connection) and returns their total time.
func pooledDrive(c *pgx.Conn) Drive {
	return func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < 3; i++ {
			if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
}

// canaryEntries returns the journal entries of the canary toxic.
func canaryEntries(t *testing.T, env *Env) []Entry {
	t.Helper()
	entries, err := ReadJournal(env.Journal.Path())
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for _, e := range entries {
		if e.Toxic == CanaryToxicName(env.RunID) {
			out = append(out, e)
		}
	}
	return out
}

// TestCheckOnPathCanaryPooled: traffic on a held connection moves no
// counters (remote: bytes counted at close; embedded here with its counters
// hidden), so the canary decides: it slows the held connection's queries,
// and it is removed and journaled as applied then reverted.
func TestCheckOnPathCanaryPooled(t *testing.T) {
	pg := testutil.Postgres(t)
	for _, mode := range []struct {
		name string
		tp   func(t *testing.T) Toxiproxy
	}{
		{"embedded-no-counters", func(t *testing.T) Toxiproxy { return noCounters{startEmbedded(t)} }},
		{"remote", func(t *testing.T) Toxiproxy { return startRemoteServer(t) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			tp := mode.tp(t)
			proxy, addr := pgProxy(t, tp, pg)
			env, _ := testEnv(t, tp)
			held := mustConnect(t, pg, addr)
			roundTrip(t, held)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			opts := OnPathOptions{RunID: env.RunID, Journal: env.Journal}
			if err := CheckOnPath(ctx, tp, proxy, pooledDrive(held), opts); err != nil {
				t.Fatalf("pooled traffic through the proxy: %v", err)
			}
			ev := canaryEntries(t, env)
			if len(ev) != 2 || ev[0].Op != OpApply || ev[1].Op != OpRevert || ev[0].Proxy != proxy {
				t.Fatalf("canary journal entries %+v, want apply then revert on proxy %s", ev, proxy)
			}
			assertClean(t, tp, env)
			if left, err := Leftovers(ctx, tp); err != nil || len(left) != 0 {
				t.Fatalf("toxics left after the check: %v %v", left, err)
			}
		})
	}
}

// TestCheckOnPathCanaryAroundProxy: the held connection bypasses the proxy,
// so neither the counters nor the canary see it: ErrNotOnPath (and not
// ErrCountersUnavailable, which the runner only warns about).
func TestCheckOnPathCanaryAroundProxy(t *testing.T) {
	pg := testutil.Postgres(t)
	tp := noCounters{startEmbedded(t)}
	proxy, _ := pgProxy(t, tp, pg)
	env, _ := testEnv(t, tp)
	direct := mustConnect(t, pg, pg.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := CheckOnPath(ctx, tp, proxy, pooledDrive(direct), OnPathOptions{RunID: env.RunID, Journal: env.Journal})
	if !errors.Is(err, ErrNotOnPath) || errors.Is(err, ErrCountersUnavailable) || !strings.Contains(err.Error(), "canary") {
		t.Fatalf("traffic around the proxy: want ErrNotOnPath naming the canary, got %v", err)
	}
	t.Log(err)
	if len(canaryEntries(t, env)) != 2 {
		t.Fatalf("canary not journaled as applied and reverted: %+v", canaryEntries(t, env))
	}
	assertClean(t, tp, env)

	// Without a run id there is no canary: the missing counters are the
	// answer.
	err = CheckOnPath(ctx, tp, proxy, pooledDrive(direct), OnPathOptions{})
	if !errors.Is(err, ErrCountersUnavailable) {
		t.Fatalf("no run id, no counters: want ErrCountersUnavailable, got %v", err)
	}
}

// TestCheckOnPathCanaryRemovedOnError: the drive fails (the run is
// interrupted) while the canary is on; the canary is removed all the same.
func TestCheckOnPathCanaryRemovedOnError(t *testing.T) {
	pg := testutil.Postgres(t)
	tp := noCounters{startEmbedded(t)}
	proxy, addr := pgProxy(t, tp, pg)
	env, _ := testEnv(t, tp)
	held := mustConnect(t, pg, addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	inner := pooledDrive(held)
	drive := func(ctx context.Context) (time.Duration, error) {
		calls++
		if calls == 1+defaultCanaryRounds+1 { // first drive with the canary on
			ps, err := tp.Proxy(ctx, proxy)
			if err != nil || len(ps.Toxics) == 0 || !hasToxic(ps.Toxics, CanaryToxicName(env.RunID)) {
				t.Errorf("canary not on the proxy during the drive: %+v %v", ps.Toxics, err)
			}
			cancel() // Ctrl-C
			return 0, ctx.Err()
		}
		return inner(ctx)
	}
	err := CheckOnPath(ctx, tp, proxy, drive, OnPathOptions{RunID: env.RunID, Journal: env.Journal})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotOnPath) {
		t.Fatalf("interrupted check: want context.Canceled, got %v", err)
	}
	assertClean(t, tp, env)
	ps, err := tp.Proxy(context.Background(), proxy)
	if err != nil || hasToxic(ps.Toxics, CanaryToxicName(env.RunID)) {
		t.Fatalf("canary left on the proxy: %+v %v", ps.Toxics, err)
	}
}

func hasToxic(ts []Toxic, name string) bool {
	for _, x := range ts {
		if x.Name == name {
			return true
		}
	}
	return false
}
