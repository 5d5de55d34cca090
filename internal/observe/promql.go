package observe

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/drillhq/drill/internal/event"
)

// SourcePromQL is the Event.Source of samples queried from Prometheus.
const SourcePromQL = "promql"

// PromQL runs an instant query against a Prometheus server every Interval
// (scenario observers.promql) and emits one [event.Metric] per series of
// the result: Metric is Name, Labels the series labels without __name__,
// Value the sample, At the time the query was sent. A scalar result gives
// one event without labels. A failed query, and each new warning, become an
// [event.Note].
type PromQL struct {
	// Name names the metric events.
	Name string
	// URL is the Prometheus base URL (e.g. http://127.0.0.1:9090).
	URL string
	// Query is the PromQL expression.
	Query string
	// Interval between query starts; default 5s.
	Interval time.Duration
	// Timeout of one query; default Interval, at least 1s and at most 10s.
	Timeout time.Duration
	// Client is the HTTP client; default the Prometheus client's default round tripper.
	Client *http.Client
	// Clock stamps the events; required.
	Clock *event.Clock
	// Sink receives the events; required.
	Sink event.Sink
	// Log receives debug logs; default discards.
	Log *slog.Logger

	api      promv1.API
	lastErr  string
	warnings map[string]bool
}

// NewPromAPI builds a Prometheus HTTP API client for baseURL (client may be nil).
// Errors: an unparsable URL.
func NewPromAPI(baseURL string, client *http.Client) (promv1.API, error) {
	cfg := api.Config{Address: baseURL}
	if client != nil {
		cfg.Client = client
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("create prometheus client for %s: %w", baseURL, err)
	}
	return promv1.NewAPI(c), nil
}

func (q *PromQL) init() error {
	if q.Interval <= 0 {
		q.Interval = 5 * time.Second
	}
	if q.Timeout <= 0 {
		q.Timeout = min(max(q.Interval, time.Second), 10*time.Second)
	}
	if q.Log == nil {
		q.Log = slog.New(slog.DiscardHandler)
	}
	if q.warnings == nil {
		q.warnings = map[string]bool{}
	}
	if q.api == nil {
		a, err := NewPromAPI(q.URL, q.Client)
		if err != nil {
			return err
		}
		q.api = a
	}
	return nil
}

// Run queries once immediately, then every Interval until ctx is done. It
// returns an error only for an unusable URL, else nil when ctx ends.
func (q *PromQL) Run(ctx context.Context) error {
	if err := q.init(); err != nil {
		return err
	}
	every(ctx, q.Interval, func() {
		at := q.Clock.Now()
		evs, warns, err := q.QueryOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if msg := err.Error(); msg != q.lastErr {
				q.Sink.Emit(event.Event{At: at, Kind: event.Note, Source: SourcePromQL, Detail: fmt.Sprintf("promql %s: %s", q.Name, msg)})
				q.lastErr = msg
			}
			return
		}
		q.lastErr = ""
		for _, w := range warns {
			if !q.warnings[w] {
				q.warnings[w] = true
				q.Sink.Emit(event.Event{At: at, Kind: event.Note, Source: SourcePromQL, Detail: fmt.Sprintf("promql %s warning: %s", q.Name, w)})
			}
		}
		for _, e := range evs {
			e.At = at
			q.Sink.Emit(e)
		}
	})
	return nil
}

// QueryOnce runs the instant query now and returns its Metric events
// (stamped with the time the query was sent) and the server's warnings.
// Errors: transport, API error, or a result type other than vector or
// scalar (wrapped "query prometheus <name>").
func (q *PromQL) QueryOnce(ctx context.Context) ([]event.Event, []string, error) {
	if err := q.init(); err != nil {
		return nil, nil, err
	}
	at := q.Clock.Now()
	ctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	v, warns, _, err := q.api.Query(ctx, q.Query, time.Now(), promv1.WithTimeout(q.Timeout))
	if err != nil {
		return nil, warns, fmt.Errorf("query prometheus %s (%s): %w", q.Name, q.Query, err)
	}
	var out []event.Event
	switch r := v.(type) {
	case model.Vector:
		for _, s := range r {
			out = append(out, metricEvent(q.Name, at, s.Metric, float64(s.Value)))
		}
	case *model.Scalar:
		out = append(out, metricEvent(q.Name, at, nil, float64(r.Value)))
	default:
		return nil, warns, fmt.Errorf("query prometheus %s (%s): result type %s, want vector or scalar", q.Name, q.Query, v.Type())
	}
	return out, warns, nil
}

func metricEvent(name string, at time.Duration, m model.Metric, v float64) event.Event {
	var l map[string]string
	if len(m) > 0 {
		l = make(map[string]string, len(m))
		for k, val := range m {
			if k == model.MetricNameLabel {
				continue
			}
			l[string(k)] = string(val)
		}
	}
	return event.Event{At: at, Kind: event.Metric, Source: SourcePromQL, Metric: name, Labels: l, Value: v}
}

// QueryRange evaluates query over the window [from, to] of the run's clock
// (offsets since clock.Start) every step and returns one Metric event per
// sample, named name, each at its sample's time on the run's clock (the
// server's wall-clock timestamp converted, so ms resolution at best).
// Errors: transport, API error, non-matrix result, to before from, step <= 0.
func QueryRange(ctx context.Context, a promv1.API, clock *event.Clock, name, query string, from, to, step time.Duration) ([]event.Event, error) {
	if step <= 0 || to < from {
		return nil, fmt.Errorf("query prometheus range %s: invalid window [%s, %s] step %s", name, from, to, step)
	}
	start := clock.Start()
	r := promv1.Range{Start: start.Add(from), End: start.Add(to), Step: step}
	v, _, _, err := a.QueryRange(ctx, query, r)
	if err != nil {
		return nil, fmt.Errorf("query prometheus range %s (%s): %w", name, query, err)
	}
	mat, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("query prometheus range %s (%s): result type %s, want matrix", name, query, v.Type())
	}
	var out []event.Event
	for _, ss := range mat {
		for _, p := range ss.Values {
			// p.Timestamp has no monotonic reading: Offset uses wall clocks.
			out = append(out, metricEvent(name, clock.Offset(p.Timestamp.Time()), ss.Metric, float64(p.Value)))
		}
	}
	return out, nil
}
