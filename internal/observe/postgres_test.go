package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil"
)

// connect opens a connection to dsn as application app.
func connect(t *testing.T, dsn, app string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = app
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// values maps "metric app state" to the value of each sample.
func values(ss []PGSample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		out[strings.TrimSpace(s.Metric+" "+s.Labels["application_name"]+" "+s.Labels["state"])] = s.Value
	}
	return out
}

// TestPostgresObserver runs against a real PostgreSQL: three connections of
// one application (one of them idle in a transaction) and one of another
// are counted per application and per state, the observer's own
// connection is not; a closed application's series goes to 0 instead of
// vanishing; while the server is paused (SIGSTOP of its process tree) a
// poll fails within its timeout and records pg_up 0 and a note, and the
// poll after the server resumes reads it again and says so.
func TestPostgresObserver(t *testing.T) {
	pg := testutil.Postgres(t)
	ctx := context.Background()
	auth := []*pgx.Conn{connect(t, pg.DSN, "payment-core-auth"), connect(t, pg.DSN, "payment-core-auth"), connect(t, pg.DSN, "payment-core-auth")}
	tax := connect(t, pg.DSN, "payment-core-tax")
	if _, err := auth[2].Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}

	sink := &event.Log{}
	p := &Postgres{Name: "pg", DSN: pg.DSN, Interval: 200 * time.Millisecond, Clock: event.NewClock(), Sink: sink}
	got, err := p.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"pg_backends payment-core-auth":                           3,
		"pg_backends payment-core-tax":                            1,
		"pg_backends_state payment-core-auth idle":                2,
		"pg_backends_state payment-core-auth idle in transaction": 1,
		"pg_backends_state payment-core-tax idle":                 1,
	}
	v := values(got)
	for k, n := range want {
		if v[k] != n {
			t.Errorf("%s = %v, want %v (all: %v)", k, v[k], n, v)
		}
	}
	for k := range v {
		if strings.Contains(k, observerApplication) {
			t.Errorf("the observer counted its own connection: %s", k)
		}
	}
	for _, s := range got {
		if s.Labels["job"] != "pg" || s.Labels["datname"] != pg.Database {
			t.Errorf("sample %+v: want job pg, datname %s", s, pg.Database)
		}
	}

	if err := tax.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The backend's exit is asynchronous: poll until it has left.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err = p.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if values(got)["pg_backends payment-core-tax"] == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	v = values(got)
	if n, ok := v["pg_backends payment-core-tax"]; !ok || n != 0 {
		t.Errorf("after the tax connection closed: pg_backends payment-core-tax = %v (recorded: %v), want a 0 sample", n, ok)
	}
	if n, ok := v["pg_backends_state payment-core-tax idle"]; !ok || n != 0 {
		t.Errorf("after the tax connection closed: its idle series = %v (recorded: %v), want a 0 sample", n, ok)
	}

	if pg.PGID == 0 {
		t.Fatal("testutil.Postgres started no process group (it runs the binaries): nothing to pause")
	}
	stopped, err := proctree.Stop(pg.PGID)
	if err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := proctree.Cont(pg.PGID, stopped); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	start := time.Now()
	p.pollAndEmit(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a poll of a paused server took %s; its timeout is %s", took, p.Timeout)
	}
	resume()
	deadline = time.Now().Add(10 * time.Second)
	for {
		p.pollAndEmit(ctx)
		if !p.poll.failing || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ups []float64
	var notes []string
	for _, e := range sink.Events() {
		switch {
		case e.Kind == event.Metric && e.Metric == MetricPGUp:
			ups = append(ups, e.Value)
		case e.Kind == event.Note:
			notes = append(notes, e.Detail)
		}
	}
	if len(ups) < 2 || ups[0] != 0 || ups[len(ups)-1] != 1 {
		t.Errorf("pg_up samples %v: want 0 while paused, then 1", ups)
	}
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "observer pg: ") || !strings.Contains(notes[1], "readable again after") {
		t.Errorf("notes %q: want the failure, then the recovery", notes)
	}
}

// TestStartRunsPostgresObserver: a scenario's observers.postgres entry,
// its DSN written with ${...}, is expanded and polled by [Start] until
// stop, on the run's clock.
func TestStartRunsPostgresObserver(t *testing.T) {
	pg := testutil.Postgres(t)
	connect(t, pg.DSN, "order-gateway")
	obs := scenario.Observers{Postgres: []scenario.PostgresObserver{{Name: "pg", DSN: "${dependencies.postgres.dsn}",
		Interval: scenario.Duration{Duration: 100 * time.Millisecond}}}}
	expand := func(s string) (string, error) {
		return strings.ReplaceAll(s, "${dependencies.postgres.dsn}", pg.DSN), nil
	}
	sink := &event.Log{}
	stop, err := Start(context.Background(), obs, Deps{Expand: expand}, event.NewClock(), sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	found := false
	for !found && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		for _, e := range sink.Events() {
			if e.Kind == event.Metric && e.Metric == MetricPGBackends && e.Labels["application_name"] == "order-gateway" && e.Value == 1 {
				found = true
			}
		}
	}
	stop()
	if !found {
		t.Fatalf("no pg_backends{application_name=order-gateway} 1 sample; events: %d", len(sink.Events()))
	}
}
