package dependencies

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// TestPostgresIsPlaced: the postmaster and every process of its tree
// (background workers, and a backend forked for a connection made after
// start) run in the dependencies' group: the run's cgroup where drill may
// make one, else nice +5. After Close the run's cgroup can be removed.
func TestPostgresIsPlaced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noCgroup string
	}{
		{name: "cgroup"},
		{name: "nice", noCgroup: "cgroups switched off by the test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			privateTempDir(t)
			run := fmt.Sprintf("pg%d-%s", os.Getpid(), tc.name)
			pl, err := placement.Setup(placement.Config{RunID: run, Lower: true, NoCgroup: tc.noCgroup})
			if err != nil {
				t.Fatal(err)
			}
			if tc.noCgroup == "" && pl.Cgroup() == "" {
				t.Skipf("no writable cgroup with the cpu controller here: %s (the nice case runs)", pl.Report().NoCgroup)
			}
			g, err := pl.Deps()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			pg, err := StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresBinaries}, nil, InGroup(g))
			if errors.Is(err, ErrNoPostgres) {
				needs.Part(t, "PostgreSQL server binaries", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, pg.DSN)
			if err != nil {
				_ = pg.Close(ctx)
				t.Fatal(err)
			}
			var backend int
			if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
				t.Fatal(err)
			}
			tree, err := proctree.Tree(pg.PGID)
			if err != nil {
				t.Fatal(err)
			}
			pids := append([]int{pg.PGID, backend}, tree...)
			if len(tree) < 3 {
				t.Errorf("postgres tree %v: want the postmaster and its workers", tree)
			}
			for _, pid := range pids {
				if tc.noCgroup != "" {
					if n := niceOf(t, pid); n != placement.SUTNice {
						t.Errorf("postgres process %d: nice %d, want %d", pid, n, placement.SUTNice)
					}
					continue
				}
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
				if err != nil {
					t.Fatal(err)
				}
				if want := "/drill-" + run + "/" + placement.DepsGroup + "\n"; !strings.Contains(string(b), want) {
					t.Errorf("postgres process %d in cgroups\n%s\nwant one ending in %s", pid, b, want)
				}
			}
			_ = conn.Close(ctx)
			if err := pg.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := pl.Close(); err != nil {
				t.Errorf("remove the run's cgroup after postgres stopped: %v", err)
			}
		})
	}
}

// niceOf is field 19 of /proc/<pid>/stat.
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	n, err := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
