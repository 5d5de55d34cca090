package refservices

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ProbeConn is a PostgreSQL connection used only by readiness checks
// (HEALTH-ORD-001 MC-PS-01: `SELECT 1` with a 250 ms timeout; ADR 0077:
// "readiness does not measure load", so the check never waits for a
// connection of the request pool). It is dialled on first use and re-dialled
// after any failure; a check that cannot finish within its timeout fails
// with the timeout, never blocks longer. Safe for concurrent use: checks run
// one at a time and a check waiting for its turn counts against its own
// timeout.
type ProbeConn struct {
	cfg     *pgx.ConnConfig
	timeout time.Duration
	turn    chan struct{}
	conn    *pgx.Conn // guarded by turn
}

// NewProbeConn parses dsn and returns an undialled ProbeConn whose checks
// time out after timeout (default 250ms when <= 0). It returns an error
// naming the DSN problem when dsn does not parse.
func NewProbeConn(dsn string, timeout time.Duration) (*ProbeConn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if timeout <= 0 {
		timeout = 250 * time.Millisecond
	}
	return &ProbeConn{cfg: cfg, timeout: timeout, turn: make(chan struct{}, 1)}, nil
}

// Check runs `SELECT 1` on the dedicated connection, dialling it first when
// needed, all within the probe timeout (and ctx). A failed or timed-out
// check closes the connection so the next check dials afresh.
func (p *ProbeConn) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for readiness connection: %w", context.Cause(ctx))
	}
	defer func() { <-p.turn }()

	if p.conn == nil || p.conn.IsClosed() {
		conn, err := pgx.ConnectConfig(ctx, p.cfg)
		if err != nil {
			return fmt.Errorf("dial readiness connection: %w", err)
		}
		p.conn = conn
	}
	if _, err := p.conn.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol); err != nil {
		p.closeLocked()
		return fmt.Errorf("select 1: %w", err)
	}
	return nil
}

// Close closes the dedicated connection, if any, waiting at most 1 s.
func (p *ProbeConn) Close() {
	p.turn <- struct{}{}
	defer func() { <-p.turn }()
	p.closeLocked()
}

func (p *ProbeConn) closeLocked() {
	if p.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.conn.Close(ctx)
	p.conn = nil
}

// PoolOptions sizes a request pool.
type PoolOptions struct {
	// MaxConns is the pool's size: connections kept open once opened;
	// required, > 0.
	MaxConns int32
	// Overflow is how many connections beyond MaxConns the pool opens
	// while all of them are busy, closed again when released while
	// MaxConns connections are already idle (SQLAlchemy's max_overflow; ADR
	// 0077's pool size + overflow budget, "5 + 5"); default 0. The pool
	// never holds more than MaxConns + Overflow connections.
	Overflow int32
	// ConnectTimeout bounds each dial (TCP and PostgreSQL start-up);
	// default 2s. A dial through a stalled proxy otherwise hangs.
	ConnectTimeout time.Duration
	// Name is set as application_name, to tell pools apart in pg_stat_activity.
	Name string
	// WarmConns connections (at most MaxConns) are opened before OpenPool
	// returns, so the first burst of load does not dial dozens of
	// connections at once; default 0. They are not kept as a minimum: a
	// pool that re-dials in the background while its database hangs only
	// piles up hung connection attempts (each one a PostgreSQL backend)
	// that all end at once when the database comes back.
	WarmConns int32
}

// OpenPool parses dsn and opens a pgxpool with opts, then pings it once
// within ctx so a caller knows the database answers. Connections are
// created lazily up to MaxConns + Overflow. The pool is closed again on
// error.
func OpenPool(ctx context.Context, dsn string, opts PoolOptions) (*pgxpool.Pool, error) {
	if opts.MaxConns <= 0 {
		return nil, errors.New("open pool: MaxConns must be > 0")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.Overflow < 0 {
		return nil, errors.New("open pool: Overflow must be >= 0")
	}
	cfg.MaxConns = opts.MaxConns + opts.Overflow
	var pool *pgxpool.Pool
	if opts.Overflow > 0 {
		size := opts.MaxConns
		// Called after a release, before the connection is idle again: an
		// overflow connection goes when the pool's size is idle already.
		cfg.AfterRelease = func(*pgx.Conn) bool { return pool.Stat().IdleConns() < size }
	}
	warm := min(max(opts.WarmConns, 0), opts.MaxConns)
	ct := opts.ConnectTimeout
	if ct <= 0 {
		ct = 2 * time.Second
	}
	cfg.ConnConfig.ConnectTimeout = ct
	if opts.Name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.Name
	}
	pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool %s: %w", opts.Name, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping pool %s: %w", opts.Name, err)
	}
	if err := warmPool(ctx, pool, warm); err != nil {
		pool.Close()
		return nil, fmt.Errorf("warm pool %s: %w", opts.Name, err)
	}
	return pool, nil
}

// warmPool holds n connections at once, so n are open, then releases them.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int32) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

// EnsureSchema runs the DDL statements in one transaction holding the
// transaction-scoped advisory lock lockKey, so replicas starting together
// do not race on CREATE TABLE IF NOT EXISTS (which PostgreSQL does not make
// safe against concurrent creators). Statements should be idempotent.
func EnsureSchema(ctx context.Context, pool *pgxpool.Pool, lockKey int64, ddl ...string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin schema transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
		return fmt.Errorf("take schema lock: %w", err)
	}
	for _, stmt := range ddl {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit schema: %w", err)
	}
	return nil
}

// openPoolsTimeout bounds [OpenPools].
const openPoolsTimeout = 5 * time.Second

// OpenPools opens one pool per opts ([OpenPool]) and creates the schema on the
// first ([EnsureSchema] with lockKey and ddl), all within 5 s and ctx. It
// returns the pools in the order of opts; on error it closes those it
// opened and returns the error of the pool or the schema.
func OpenPools(ctx context.Context, dsn string, lockKey int64, ddl []string, opts ...PoolOptions) (_ []*pgxpool.Pool, err error) {
	if len(opts) == 0 {
		return nil, errors.New("open pools: no pool to open")
	}
	ctx, cancel := context.WithTimeout(ctx, openPoolsTimeout)
	defer cancel()
	var pools []*pgxpool.Pool
	defer func() {
		if err != nil {
			for _, p := range pools {
				p.Close()
			}
		}
	}()
	for _, o := range opts {
		p, err := OpenPool(ctx, dsn, o)
		if err != nil {
			return nil, err
		}
		pools = append(pools, p)
	}
	if err := EnsureSchema(ctx, pools[0], lockKey, ddl...); err != nil {
		return nil, err
	}
	return pools, nil
}

// StatementContext returns the context for one statement on a connection
// already acquired for ctx's request: ctx's deadline and values, but not
// its cancellation. A client that goes away while its statement runs
// (its HTTP request's context is cancelled) then does not cut the
// statement off: pgx cannot tell where in the protocol a cancelled
// statement stopped, so it closes the pooled connection, and a new
// PostgreSQL backend costs tens of ms of CPU on a small machine. The
// statement finishes, or ends at ctx's deadline, as in a thread-per-request
// server that notices a gone client only when it writes the answer. Call
// the CancelFunc when the statement is done.
func StatementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(sctx, d)
	}
	return sctx, func() {}
}
