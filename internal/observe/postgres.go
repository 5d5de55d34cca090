package observe

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/event"
)

// SourcePostgres is the Source of the events a [Postgres] observer emits.
const SourcePostgres = "postgres"

// Metric names a [Postgres] observer records.
const (
	// MetricPGBackends: client backends per datname and application_name,
	// all states.
	MetricPGBackends = "pg_backends"
	// MetricPGBackendsState: client backends per datname,
	// application_name and state.
	MetricPGBackendsState = "pg_backends_state"
	// MetricPGUp: 1 after a poll that read pg_stat_activity, 0 after one
	// that did not.
	MetricPGUp = "pg_up"
)

// postgresQuery counts the client backends of pg_stat_activity by
// database, application and state, leaving out the observer's own.
const postgresQuery = `SELECT coalesce(datname, ''), application_name, coalesce(state, ''), count(*)
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
GROUP BY 1, 2, 3`

// observerApplication is the application_name of the observer's own
// connection.
const observerApplication = "drill-observer"

// Postgres polls a PostgreSQL server's pg_stat_activity every Interval and
// records its client backends as metric events on the run's clock
// (scenario.PostgresObserver says which). All samples of one poll carry the
// time the poll started. A failed poll (the server paused, refusing,
// slower than the timeout) is pg_up 0 and a note (the first failure, then
// one when the error changes, one when polling recovers); the connection
// is opened again at the next poll. Run never fails for the server's sake.
type Postgres struct {
	// Name is the observer's name (label job).
	Name string
	// DSN is the server's postgres:// URL.
	DSN string
	// Interval between poll starts; default 1s.
	Interval time.Duration
	// Timeout bounds one poll, connecting included; default Interval, at
	// least 500ms.
	Timeout time.Duration
	// Clock stamps the events; required.
	Clock *event.Clock
	// Sink receives the events; required.
	Sink event.Sink
	// Log receives debug logs; default discards.
	Log *slog.Logger

	conn *pgx.Conn
	// seen holds every series recorded so far (metric and labels), so one
	// that vanishes is recorded as 0.
	seen map[string]pgSeries
	poll pollState
}

// pgSeries is one recorded series: its metric and labels.
type pgSeries struct {
	metric string
	labels map[string]string
}

// PGSample is one series' value in a poll.
type PGSample struct {
	Metric string
	Labels map[string]string
	Value  float64
}

// Run polls once immediately, then every Interval until ctx is done, and
// closes its connection. It returns nil when ctx ends.
func (p *Postgres) Run(ctx context.Context) error {
	p.defaults()
	defer p.close()
	every(ctx, p.Interval, func() { p.pollAndEmit(ctx) })
	return nil
}

func (p *Postgres) defaults() {
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	if p.Timeout <= 0 {
		p.Timeout = max(p.Interval, 500*time.Millisecond)
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.seen == nil {
		p.seen = map[string]pgSeries{}
	}
}

func (p *Postgres) close() {
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.conn.Close(ctx)
		p.conn = nil
	}
}

func (p *Postgres) pollAndEmit(ctx context.Context) {
	at := p.Clock.Now()
	samples, err := p.Poll(ctx)
	if ctx.Err() != nil {
		return // shutting down: not a server failure
	}
	up := 1.0
	if err != nil {
		up = 0
		p.Log.Debug("pg_stat_activity poll failed", "observer", p.Name, "err", err)
	}
	note := p.poll.result(at, err, func(failed int, since time.Duration) string {
		return fmt.Sprintf("pg_stat_activity readable again after %d failed polls since t=%s", failed, since)
	})
	if note != "" {
		p.Sink.Emit(event.Event{At: at, Kind: event.Note, Source: SourcePostgres, Detail: fmt.Sprintf("observer %s: %s", p.Name, note)})
	}
	for _, s := range samples {
		p.Sink.Emit(event.Event{At: at, Kind: event.Metric, Source: SourcePostgres, Metric: s.Metric, Labels: s.Labels, Value: s.Value})
	}
	p.Sink.Emit(event.Event{At: at, Kind: event.Metric, Source: SourcePostgres, Metric: MetricPGUp, Labels: map[string]string{"job": p.Name}, Value: up})
}

// Poll reads pg_stat_activity once, connecting first when it has no
// connection, and returns the samples in a stable order (metric, then
// labels): every series of this poll, and 0 for each series recorded
// before that this poll lacks. On an error it returns no sample and drops
// the connection. Errors: the DSN does not parse, the server cannot be
// reached, or the query fails or outlasts Timeout.
func (p *Postgres) Poll(ctx context.Context) ([]PGSample, error) {
	p.defaults()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	if p.conn == nil {
		cfg, err := pgx.ParseConfig(p.DSN)
		if err != nil {
			return nil, fmt.Errorf("postgres observer: dsn: %w", err)
		}
		cfg.RuntimeParams["application_name"] = observerApplication
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("connect to %s:%d: %w", cfg.Host, cfg.Port, err)
		}
		p.conn = conn
	}
	rows, err := p.conn.Query(ctx, postgresQuery)
	if err != nil {
		p.dropConn()
		return nil, fmt.Errorf("query pg_stat_activity: %w", err)
	}
	now := map[string]PGSample{}
	add := func(metric string, labels map[string]string, n float64) {
		k := seriesKey(metric, labels)
		s, ok := now[k]
		if !ok {
			s = PGSample{Metric: metric, Labels: labels}
		}
		s.Value += n
		now[k] = s
	}
	for rows.Next() {
		var db, app, state string
		var n int64
		if err := rows.Scan(&db, &app, &state, &n); err != nil {
			rows.Close()
			p.dropConn()
			return nil, fmt.Errorf("read pg_stat_activity: %w", err)
		}
		base := map[string]string{"job": p.Name, "datname": db, "application_name": app}
		add(MetricPGBackends, base, float64(n))
		withState := map[string]string{"job": p.Name, "datname": db, "application_name": app, "state": state}
		add(MetricPGBackendsState, withState, float64(n))
	}
	if err := rows.Err(); err != nil {
		p.dropConn()
		return nil, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	for k, s := range p.seen {
		if _, ok := now[k]; !ok {
			now[k] = PGSample{Metric: s.metric, Labels: s.labels}
		}
	}
	keys := make([]string, 0, len(now))
	for k, s := range now {
		keys = append(keys, k)
		p.seen[k] = pgSeries{metric: s.Metric, labels: s.Labels}
	}
	sort.Strings(keys)
	out := make([]PGSample, 0, len(keys))
	for _, k := range keys {
		out = append(out, now[k])
	}
	return out, nil
}

func (p *Postgres) dropConn() {
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = p.conn.Close(ctx)
		p.conn = nil
	}
}

// seriesKey identifies a series by its metric and sorted labels.
func seriesKey(metric string, labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(metric)
	for _, n := range names {
		b.WriteString("\x00")
		b.WriteString(n)
		b.WriteString("=")
		b.WriteString(labels[n])
	}
	return b.String()
}
