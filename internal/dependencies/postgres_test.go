package dependencies

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// privateTempDir points TMPDIR at a fresh dir the unprivileged server user can
// traverse, so the test can see exactly what was left behind.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} { // t.TempDir's parent is 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", dir)
	return dir
}

func startBinaries(t *testing.T, spec scenario.PostgresDep) *Postgres {
	t.Helper()
	spec.Mode = scenario.PostgresBinaries
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := StartPostgres(ctx, spec, nil)
	if errors.Is(err, ErrNoPostgres) {
		needs.Part(t, "PostgreSQL server binaries", err)
	}
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	return pg
}

func TestPostgresBinariesStartQueryClose(t *testing.T) {
	tmp := privateTempDir(t)
	pg := startBinaries(t, scenario.PostgresDep{
		Database:       "orders",
		User:           "app",
		MaxConnections: 50,
		InitSQL:        "CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1), (2);",
	})
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = pg.Close(context.Background())
		}
	})
	if pg.Host != "127.0.0.1" || pg.Port == 0 || pg.PGID <= 1 || pg.Mode != scenario.PostgresBinaries {
		t.Fatalf("unexpected postgres %+v", pg)
	}
	if !strings.HasPrefix(pg.Dir, tmp) {
		t.Fatalf("dir %s not under TMPDIR %s", pg.Dir, tmp)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatalf("connect %s: %v", pg.DSN, err)
	}
	var n int
	var user, db, fsync, maxConn string
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM t), current_user, current_database(),
		current_setting('fsync'), current_setting('max_connections')`).Scan(&n, &user, &db, &fsync, &maxConn)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if n != 2 || user != "app" || db != "orders" || fsync != "off" || maxConn != "50" {
		t.Fatalf("got n=%d user=%s db=%s fsync=%s max_connections=%s", n, user, db, fsync, maxConn)
	}
	// Keep the connection open so a backend exists at Close.
	tree, err := proctree.Tree(pg.PGID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree) < 3 {
		t.Fatalf("expected postmaster plus children, got %v", tree)
	}

	if err := pg.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	for _, pid := range tree {
		if proctree.Alive(pid) {
			t.Errorf("process %d of the cluster still alive after Close", pid)
		}
	}
	if _, err := os.Stat(pg.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still exists (err=%v)", pg.Dir, err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	if len(left) != 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
	if c, err := net.DialTimeout("tcp", pg.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("port %s still accepts connections after Close", pg.Addr)
	}
	if err := pg.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestPostgresBadInitSQLLeavesNothing(t *testing.T) {
	tmp := privateTempDir(t)
	before, _ := proctree.Snapshot()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresBinaries, InitSQL: "CREATE TABLEX oops"}, nil)
	if errors.Is(err, ErrNoPostgres) {
		needs.Part(t, "PostgreSQL server binaries", err)
	}
	if err == nil {
		_ = pg.Close(ctx)
		t.Fatal("StartPostgres accepted bad init SQL")
	}
	if !strings.Contains(err.Error(), "init SQL") || !strings.Contains(err.Error(), "TABLEX") {
		t.Errorf("error does not say what failed: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	if len(left) != 0 {
		t.Errorf("left behind in TMPDIR: %v", left)
	}
	// Other tests on this machine run their own servers: only processes
	// working inside our TMPDIR are ours.
	after, _ := proctree.Snapshot()
	for pid, p := range after {
		cwd, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		if _, old := before[pid]; !old && p.State != 'Z' && strings.HasPrefix(cwd, tmp) {
			t.Errorf("process %d (%s) left behind in %s", pid, p.Comm, cwd)
		}
	}
}

func TestPostgresUnknownMode(t *testing.T) {
	_, err := StartPostgres(context.Background(), scenario.PostgresDep{Mode: "docker"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"docker"`) || !strings.Contains(err.Error(), "binaries") {
		t.Fatalf("want an error naming the mode and the valid ones, got %v", err)
	}
}

func TestPostgresBinariesMissingNamesInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findPostgresBinariesIn(t.TempDir())
	if !errors.Is(err, ErrNoPostgres) || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("want ErrNoPostgres naming the package, got %v", err)
	}
}

// TestFindBinariesFallsBackToDebianDirs: with nothing on PATH, the
// binaries are found in Debian's <root>/<version>/bin, the highest version
// whose initdb and postgres are both executable first.
func TestFindBinariesFallsBackToDebianDirs(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	for dir, progs := range map[string][]string{
		"13/bin": {"initdb", "postgres"},
		"15/bin": {"initdb", "postgres"},
		"17/bin": {"initdb"}, // half an install: skipped
	} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range progs {
			if err := os.WriteFile(filepath.Join(root, dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := findPostgresBinariesIn(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin", "initdb"); b.initdb != want || b.postgres != filepath.Join(root, "15", "bin", "postgres") {
		t.Fatalf("found %+v, want %s and its postgres", b, want)
	}
}

func TestPostgresContainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	present, err := docker.ImagePresent(ctx, DefaultPostgresImage)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine (PostgreSQL in a container)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !present {
		_, err := StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresContainer}, nil)
		if !errors.Is(err, docker.ErrImageMissing) || !strings.Contains(err.Error(), DefaultPostgresImage) {
			t.Fatalf("want docker.ErrImageMissing naming the image, got %v", err)
		}
		t.Skipf("Docker answers but image %s is not present locally (no registry); checked the error only: %v",
			DefaultPostgresImage, err)
	}
	pg, err := StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresContainer, InitSQL: "CREATE TABLE t (id int)"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
}
