// Package dependencies starts the local dependencies a drill needs and stops them
// without leaving anything behind: a throwaway PostgreSQL cluster (from the
// machine's own binaries, or a container where a Docker engine answers) and a
// stub HTTP service (the "tax API" of BULKHEAD-PAY-001).
//
// Everything a dependency starts is owned by the value returned and ends with
// its Close: processes are reaped, temp dirs removed, containers terminated.
package dependencies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
)

// Defaults applied by [StartPostgres] to an unset [scenario.PostgresDep] field.
const (
	DefaultPostgresUser           = "drill"
	DefaultPostgresDatabase       = "drill"
	DefaultPostgresMaxConnections = 300
	DefaultPostgresImage          = "postgres:16-alpine"
	// DefaultPostgresStartTimeout bounds initdb plus the wait until the
	// server accepts connections.
	DefaultPostgresStartTimeout = 60 * time.Second
	// postgresStopGrace is how long a fast shutdown may take before the
	// process tree is killed.
	postgresStopGrace = 10 * time.Second
)

// ErrNoPostgres means no way to start PostgreSQL was found: neither the
// server binaries (initdb, postgres) nor a Docker engine with the image
// present locally. Its message names what to install.
var ErrNoPostgres = errors.New("no way to start PostgreSQL")

// Postgres is a running throwaway PostgreSQL. Its fields are read-only.
// Close it exactly once it is no longer needed; Close is idempotent and safe
// for concurrent use.
type Postgres struct {
	// Host is 127.0.0.1 (binaries) or the container's mapped host.
	Host string
	// Port is the TCP port on Host.
	Port int
	// Addr is Host:Port.
	Addr string
	// DSN is a pgx/libpq URL: postgres://user@host:port/db?sslmode=disable.
	DSN string
	// User is the superuser the cluster trusts (no password for binaries;
	// password "drill" in a container).
	User string
	// Database is the database created at start.
	Database string
	// PGID is the process group of the postmaster (binaries mode; 0 for a
	// container). Its children live in their own sessions: pause the whole
	// tree with [proctree.Stop], not kill(-PGID, SIGSTOP) alone.
	PGID int
	// ContainerID is the Docker container id (container mode; "" otherwise).
	ContainerID string
	// Mode is the mode actually used: binaries or container.
	Mode scenario.PostgresMode
	// Dir is the temp dir holding data, socket and log (binaries mode).
	Dir string

	log       *slog.Logger
	group     *placement.Group
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the postmaster has been reaped
	waitErr   error
	terminate func(ctx context.Context) error // container mode
	opts      postgresOptions
	closeOnce sync.Once
	closeErr  error
}

// StartPostgres starts a throwaway PostgreSQL cluster as spec says and
// blocks until it accepts connections with pgx, the database exists and
// spec.InitSQL has run.
//
// Mode binaries (or auto when initdb and postgres are found on PATH or under
// /usr/lib/postgresql/*/bin): initdb into a temp dir, then postgres as a child
// in its own process group on a random free port of 127.0.0.1 with fsync,
// synchronous_commit and full_page_writes off, the unix socket inside the
// temp dir and trust auth. Run as root, both run as the "postgres" user if it
// exists, else "nobody" (PostgreSQL refuses to run as root). The postmaster
// receives SIGKILL if drill dies (parent-death signal); its children, in
// their own sessions, see it gone and exit by themselves, unless they are
// stopped by a process pause: then `drill cleanup` continues them from the
// journal (inject.Cleanup) and they exit. The temp dir outlives a killed
// owner: journal it through [WithFootprint] and `drill cleanup` removes it.
//
// Mode container (or auto without binaries): testcontainers-go's PostgreSQL
// module with spec.Image, which must already be present locally (drill never
// pulls).
//
// opts: [WithFootprint] reports the temp dir and the postmaster as they
// come into being, so that a caller can journal them; with [InGroup] the
// server and every process it forks run in a placement group (binaries
// mode; a container is left where Docker puts it).
//
// Errors: [ErrNoPostgres] (wrapped, naming what to install) when nothing can
// start PostgreSQL; otherwise an error carrying the tail of the server log.
// On error nothing is left behind.
func StartPostgres(ctx context.Context, spec scenario.PostgresDep, log *slog.Logger, opts ...PostgresOption) (*Postgres, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var o postgresOptions
	for _, opt := range opts {
		opt(&o)
	}
	spec = withPostgresDefaults(spec)
	switch spec.Mode {
	case scenario.PostgresBinaries:
		bins, err := findPostgresBinaries()
		if err != nil {
			return nil, err
		}
		return startPostgresBinaries(ctx, spec, bins, log, o)
	case scenario.PostgresContainer:
		return startPostgresContainer(ctx, spec, log)
	case scenario.PostgresAuto:
		bins, binErr := findPostgresBinaries()
		if binErr == nil {
			return startPostgresBinaries(ctx, spec, bins, log, o)
		}
		log.Info("postgres binaries not found, trying a container", "err", binErr)
		pg, ctrErr := startPostgresContainer(ctx, spec, log)
		if ctrErr == nil {
			return pg, nil
		}
		return nil, fmt.Errorf("%w: install the PostgreSQL server binaries (Debian: apt-get install postgresql) "+
			"or load image %s into a running Docker engine (binaries: %v; container: %v)",
			ErrNoPostgres, spec.Image, binErr, ctrErr)
	default:
		return nil, fmt.Errorf("start postgres: unknown mode %q; use auto, binaries or container", spec.Mode)
	}
}

// PostgresFootprint is what a binaries-mode cluster leaves on the machine
// when its owner dies without [Postgres.Close] (SIGKILL): its temp dir
// (data, socket and log; tens of MB) and its processes. Children the
// postmaster forks work in Dir/data, which names them after the postmaster
// is gone.
type PostgresFootprint struct {
	// Dir is the cluster's temp dir, an absolute path whose base name
	// starts with [PostgresDirPrefix].
	Dir string
	// Postmaster is the postmaster's process (its PID is also its process
	// group); zero until a postmaster was started.
	Postmaster proctree.ID
}

// PostgresDirPrefix starts the base name of every temp dir a binaries-mode
// cluster lives in ($TMPDIR/drill-pg-*).
const PostgresDirPrefix = "drill-pg-"

// PostgresOption changes how [StartPostgres] starts a cluster.
type PostgresOption func(*postgresOptions)

type postgresOptions struct {
	footprint func(PostgresFootprint) error
	group     *placement.Group
}

// WithFootprint makes [StartPostgres] report the cluster's footprint to
// record as it grows (binaries mode only; a container is never reported):
// once right after the temp dir is created, before anything is written
// into it, and again after each postmaster is started, before it is waited
// for. A caller journals it so that a cluster whose owner was killed can
// be found and removed. When record returns an error the start is
// aborted, nothing is left behind and StartPostgres returns that error.
func WithFootprint(record func(PostgresFootprint) error) PostgresOption {
	return func(o *postgresOptions) { o.footprint = record }
}

// report calls the footprint hook, if any.
func (o postgresOptions) report(fp PostgresFootprint) error {
	if o.footprint == nil {
		return nil
	}
	if err := o.footprint(fp); err != nil {
		return fmt.Errorf("record postgres footprint: %w", err)
	}
	return nil
}

func withPostgresDefaults(spec scenario.PostgresDep) scenario.PostgresDep {
	if spec.Mode == "" {
		spec.Mode = scenario.PostgresAuto
	}
	if spec.User == "" {
		spec.User = DefaultPostgresUser
	}
	if spec.Database == "" {
		spec.Database = DefaultPostgresDatabase
	}
	if spec.MaxConnections <= 0 {
		spec.MaxConnections = DefaultPostgresMaxConnections
	}
	if spec.Image == "" {
		spec.Image = DefaultPostgresImage
	}
	return spec
}

// InGroup runs the server and every process it forks in placement group g
// (a cgroup with a lower CPU weight than drill's, or nice +5); nil leaves
// them where drill runs.
func InGroup(g *placement.Group) PostgresOption {
	return func(o *postgresOptions) { o.group = g }
}

// postgresBinaries are the absolute paths of the server programs.
type postgresBinaries struct{ initdb, postgres string }

// debianPostgresRoot holds Debian's versioned PostgreSQL directories
// (<version>/bin), which are not on PATH.
const debianPostgresRoot = "/usr/lib/postgresql"

// findPostgresBinaries looks on PATH, then in Debian's versioned directories
// (highest version first).
func findPostgresBinaries() (postgresBinaries, error) {
	return findPostgresBinariesIn(debianPostgresRoot)
}

// findPostgresBinariesIn is findPostgresBinaries with Debian's root given
// (tests use a directory of their own).
func findPostgresBinariesIn(debianRoot string) (postgresBinaries, error) {
	initdb, err1 := exec.LookPath("initdb")
	server, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return postgresBinaries{initdb: initdb, postgres: server}, nil
	}
	dirs, _ := filepath.Glob(filepath.Join(debianRoot, "*", "bin"))
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		b := postgresBinaries{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	return postgresBinaries{}, fmt.Errorf("%w: initdb and postgres not found on PATH or in /usr/lib/postgresql/*/bin; "+
		"install the server binaries (Debian: apt-get install postgresql)", ErrNoPostgres)
}

// LookPostgres returns the directory of the PostgreSQL server binaries
// (initdb and postgres) that drill would start: on PATH, then in Debian's
// /usr/lib/postgresql/<version>/bin, highest version first. The error wraps
// [ErrNoPostgres] and says what to install.
func LookPostgres() (string, error) {
	b, err := findPostgresBinaries()
	if err != nil {
		return "", err
	}
	return filepath.Dir(b.initdb), nil
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// runAs says which credentials the server programs get. nil: our own.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: false, Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root and neither user postgres nor nobody exists to run PostgreSQL as " +
		"(PostgreSQL refuses to run as root)")
}

func startPostgresBinaries(ctx context.Context, spec scenario.PostgresDep, bins postgresBinaries, log *slog.Logger, o postgresOptions) (_ *Postgres, err error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultPostgresStartTimeout)
	defer cancel()
	cred, err := runAs()
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	dir, err := os.MkdirTemp("", PostgresDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create postgres temp dir: %w", err)
	}
	if abs, aerr := filepath.Abs(dir); aerr == nil {
		dir = abs
	}
	pg := &Postgres{
		Host: "127.0.0.1", User: spec.User, Database: spec.Database,
		Mode: scenario.PostgresBinaries, Dir: dir, log: log, opts: o, group: o.group,
	}
	defer func() {
		if err != nil {
			_ = pg.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := o.report(PostgresFootprint{Dir: dir}); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		return nil, fmt.Errorf("create postgres socket dir: %w", err)
	}
	if cred != nil {
		if err := reachableByOthers(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("start postgres as uid %d: %w; set TMPDIR to a directory every user can enter (e.g. /tmp)",
				cred.Uid, err)
		}
		for _, p := range []string{dir, sock} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("hand postgres temp dir to uid %d: %w", cred.Uid, err)
			}
		}
	}
	data := filepath.Join(dir, "data")
	initCmd := exec.CommandContext(ctx, bins.initdb, "-D", data, "-U", spec.User, "--auth=trust",
		"--encoding=UTF8", "--no-locale", "--no-sync")
	initCmd.Env = postgresEnv()
	initCmd.Dir = dir
	initCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initCmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("run initdb: %w: %s", err, tail(out, 2000))
	}
	log.Debug("postgres initdb done", "dir", dir)

	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := pg.startServer(ctx, spec, bins, cred, data, sock)
		if err == nil {
			break
		}
		if attempt < attempts && errors.Is(err, errPortTaken) {
			log.Debug("postgres port taken, retrying", "attempt", attempt)
			continue
		}
		return nil, err
	}
	if err := pg.prepare(ctx, spec); err != nil {
		return nil, err
	}
	log.Info("postgres started", "addr", pg.Addr, "pgid", pg.PGID, "dir", dir)
	return pg, nil
}

var errPortTaken = errors.New("port taken")

func postgresEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}
}

// startServer runs postgres on a fresh free port and waits until it accepts
// connections. It returns errPortTaken when the port was grabbed meanwhile.
func (pg *Postgres) startServer(ctx context.Context, spec scenario.PostgresDep, bins postgresBinaries,
	cred *syscall.Credential, data, sock string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(pg.Dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create postgres log: %w", err)
	}
	defer logFile.Close()
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=" + strconv.Itoa(spec.MaxConnections),
		"-c", "shared_buffers=32MB", "-c", "dynamic_shared_memory_type=mmap",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning",
	}
	// Not CommandContext: the server must outlive ctx (the start deadline);
	// Close ends it.
	cmd := exec.Command(bins.postgres, args...)
	cmd.Env = postgresEnv()
	cmd.Dir = pg.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
	pg.group.Prepare(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	pg.cmd, pg.exited, pg.PGID = cmd, exited, cmd.Process.Pid
	go func() {
		pg.waitErr = cmd.Wait()
		close(exited)
	}()
	if ids := proctree.IDs([]int{cmd.Process.Pid}); len(ids) == 1 {
		if err := pg.opts.report(PostgresFootprint{Dir: pg.Dir, Postmaster: ids[0]}); err != nil {
			return err
		}
	}
	// Before it accepts connections, so every backend is forked in place.
	if err := pg.group.Adopt(cmd.Process.Pid); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	pg.Port = port
	pg.Addr = net.JoinHostPort(pg.Host, strconv.Itoa(port))
	pg.DSN = fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pg.User, pg.Addr, pg.Database)

	adminDSN := fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable&connect_timeout=2", pg.User, pg.Addr)
	for {
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			pg.cmd, pg.exited, pg.PGID = nil, nil, 0
			if bytes.Contains(out, []byte("Address already in use")) {
				return fmt.Errorf("start postgres on port %d: %w", port, errPortTaken)
			}
			return fmt.Errorf("start postgres: server exited (%v): %s", pg.waitErr, tail(out, 2000))
		case <-ctx.Done():
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("wait for postgres at %s: %w: %s", pg.Addr, ctx.Err(), tail(out, 2000))
		default:
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, adminDSN)
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		ccancel()
		if err == nil {
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-exited:
		case <-ctx.Done():
		}
	}
}

// prepare creates the database and runs the init SQL.
func (pg *Postgres) prepare(ctx context.Context, spec scenario.PostgresDep) error {
	if spec.Database != "postgres" {
		adminDSN := fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", pg.User, pg.Addr)
		conn, err := pgx.Connect(ctx, adminDSN)
		if err != nil {
			return fmt.Errorf("connect to postgres: %w", err)
		}
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{spec.Database}.Sanitize())
		_ = conn.Close(ctx)
		if err != nil {
			return fmt.Errorf("create database %q: %w", spec.Database, err)
		}
	}
	return runInitSQL(ctx, pg.DSN, spec.InitSQL)
}

// runInitSQL runs sql (may hold several statements) over the simple protocol.
func runInitSQL(ctx context.Context, dsn, sql string) error {
	if strings.TrimSpace(sql) == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to postgres for init SQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("run init SQL: %w", err)
	}
	return nil
}

// Close stops the server and removes everything it created. Binaries: SIGCONT
// (in case a fault left it paused), fast shutdown (SIGINT), and after 10 s, or
// when ctx ends, SIGKILL of the postmaster's group and of every descendant;
// then the temp dir is removed. Container: the container is terminated.
// Close returns only when no process of the cluster remains. It is
// idempotent; later calls return the first call's result.
func (pg *Postgres) Close(ctx context.Context) error {
	pg.closeOnce.Do(func() { pg.closeErr = pg.close(ctx) })
	return pg.closeErr
}

func (pg *Postgres) close(ctx context.Context) error {
	var errs []error
	if pg.terminate != nil {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if err := pg.terminate(tctx); err != nil {
			errs = append(errs, fmt.Errorf("terminate postgres container %s: %w", pg.ContainerID, err))
		}
		cancel()
	}
	if pg.cmd != nil {
		if err := pg.stopServer(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if pg.Dir != "" {
		if err := os.RemoveAll(pg.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove postgres temp dir: %w", err))
		}
	}
	if len(errs) == 0 {
		pg.log.Info("postgres stopped", "addr", pg.Addr)
	}
	return errors.Join(errs...)
}

func (pg *Postgres) stopServer(ctx context.Context) error {
	pgid := pg.PGID
	// Snapshot the tree first: once the postmaster is gone its children are
	// re-parented and can no longer be found through it.
	tree, _ := proctree.Tree(pgid)
	_ = proctree.Cont(pgid, tree)
	_ = syscall.Kill(pgid, syscall.SIGINT) // fast shutdown
	grace := time.NewTimer(postgresStopGrace)
	defer grace.Stop()
	select {
	case <-pg.exited:
	case <-grace.C:
		pg.log.Warn("postgres fast shutdown timed out; killing", "pgid", pgid)
	case <-ctx.Done():
		pg.log.Warn("postgres stop interrupted; killing", "pgid", pgid)
	}
	proctree.Kill(pgid, tree)
	<-pg.exited // SIGKILL cannot be ignored; Wait returns promptly
	// Children re-parented elsewhere: wait until none is alive.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []int
		for _, pid := range tree {
			if pid != pgid && proctree.Alive(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stop postgres: processes %v still alive after SIGKILL", alive)
		}
		for _, pid := range alive {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reachableByOthers checks that every directory from dir up to / can be
// entered by any user (o+x), as the unprivileged server user must.
func reachableByOthers(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("check temp dir: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("temp dir parent %s (mode %v) cannot be entered by other users", d, st.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// tail returns the last n bytes of b, trimmed.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
