package inject

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Embedded is a Toxiproxy v2 server running inside drill, its HTTP API on a
// random loopback port. Operations go through that API with the same code as
// [Remote], so both modes behave alike; traffic counters are live (a
// pass-through "drill_meter" toxic on each proxy counts chunks as they pass).
type Embedded struct {
	*Remote
	server *toxiproxy.ApiServer
	http   *http.Server
	served chan error
	id     string
	log    *slog.Logger

	mu     sync.Mutex
	meters map[string]bool // keys in meterRegistry owned by this server
	once   sync.Once
}

var _ Toxiproxy = (*Embedded)(nil)

// isEmbedded reports whether tp is a server of the run's own (inside
// drill's process, or its stand-in process): its proxies and toxics end
// with the run.
func isEmbedded(tp Toxiproxy) bool {
	switch t := tp.(type) {
	case *Embedded, *Metered:
		return true
	case RunOwned:
		return t.EndsWithRun()
	}
	return false
}

// RunOwned is a [Toxiproxy] that reports whether it lives and dies with
// its run (as an embedded server or the run's own stand-in does): the
// journal then marks its entries embedded, and cleanup takes an
// unreachable API as their target gone with it.
type RunOwned interface {
	Toxiproxy
	// EndsWithRun reports whether the server ends with the run.
	EndsWithRun() bool
}

// meterType is the toxic type of the pass-through byte counter.
const meterType = "drill_meter"

// meterRegistry maps a meter key to its counter. It is process-wide because
// Toxiproxy's toxic registry is: a toxic instance only gets its JSON
// attributes, so it finds its counter by key.
var (
	meterRegistry sync.Map // string -> *atomic.Int64
	registerMeter sync.Once
)

// meterToxic passes every chunk on and adds its length to a counter.
type meterToxic struct {
	Meter string `json:"meter"`
}

// Pipe implements toxics.Toxic.
func (t *meterToxic) Pipe(stub *toxics.ToxicStub) {
	// The counter may not exist yet when a client in another process
	// added this toxic ([Metered]); the meter endpoint makes it the same way.
	v, _ := meterRegistry.LoadOrStore(t.Meter, new(atomic.Int64))
	n := v.(*atomic.Int64)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			n.Add(int64(len(c.Data)))
			stub.Output <- c
		}
	}
}

// NewEmbedded starts a Toxiproxy server with its API on 127.0.0.1:<random>.
// It sets zerolog's global level to Warn: Toxiproxy's bandwidth toxic logs
// through the global zerolog logger at trace level whatever logger the server
// gets (Toxiproxy v2.12). Close it to stop every proxy and connection.
func NewEmbedded(ctx context.Context, log *slog.Logger) (*Embedded, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	registerMeter.Do(func() { toxics.Register(meterType, new(meterToxic)) })

	metrics := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	srv := toxiproxy.NewServer(metrics, zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for embedded toxiproxy api: %w", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e := &Embedded{
		Remote: NewRemote("http://" + ln.Addr().String()),
		server: srv,
		http:   &http.Server{ReadHeaderTimeout: 5 * time.Second},
		served: make(chan error, 1),
		id:     hex.EncodeToString(b),
		log:    log,
		meters: map[string]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+MetersPath, e.serveMeters)
	mux.Handle("/", srv.Routes())
	e.http.Handler = mux
	go func() { e.served <- e.http.Serve(ln) }()
	log.Info("embedded toxiproxy started", "api", e.APIURL())
	return e, nil
}

func (e *Embedded) meterKey(proxy, stream string) string { return e.id + "/" + proxy + "/" + stream }

// CreateProxy implements [Toxiproxy]; it also adds the two meter toxics.
func (e *Embedded) CreateProxy(ctx context.Context, name, listen, upstream string) (ProxyInfo, error) {
	info, err := e.Remote.CreateProxy(ctx, name, listen, upstream)
	if err != nil {
		return info, err
	}
	for _, stream := range []string{"upstream", "downstream"} {
		key := e.meterKey(name, stream)
		meterRegistry.Store(key, new(atomic.Int64))
		e.mu.Lock()
		e.meters[key] = true
		e.mu.Unlock()
	}
	if err := addMeters(ctx, e.Remote, e.id, name); err != nil {
		return info, err
	}
	return e.Proxy(ctx, name)
}

// addMeters adds the two pass-through meter toxics to proxy on the
// Toxiproxy at r, whose meters are keyed under id.
func addMeters(ctx context.Context, r *Remote, id, proxy string) error {
	for _, stream := range []string{"upstream", "downstream"} {
		err := r.AddToxic(ctx, proxy, Toxic{
			Name: meterType + "_" + stream, Type: meterType, Stream: stream, Toxicity: 1,
			Attributes: map[string]any{"meter": id + "/" + proxy + "/" + stream},
		})
		if err != nil {
			return fmt.Errorf("add traffic meter to proxy %s: %w", proxy, err)
		}
	}
	return nil
}

// Counters implements [Toxiproxy] with live byte counts.
func (e *Embedded) Counters(ctx context.Context, proxy string) (Counters, error) {
	up, ok1 := meterRegistry.Load(e.meterKey(proxy, "upstream"))
	down, ok2 := meterRegistry.Load(e.meterKey(proxy, "downstream"))
	if !ok1 || !ok2 {
		if _, err := e.Proxy(ctx, proxy); err != nil {
			return Counters{}, err
		}
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w (not created by this drill)", proxy, ErrCountersUnavailable)
	}
	return Counters{
		Upstream:   up.(*atomic.Int64).Load(),
		Downstream: down.(*atomic.Int64).Load(),
		Live:       true,
	}, nil
}

// MeterID is the key under which this server's meters count; a [Metered]
// client of a server in another process needs it.
func (e *Embedded) MeterID() string { return e.id }

// MetersPath is the path of the meter endpoint an [Embedded] server adds
// to Toxiproxy's API: GET MetersPath?proxy=NAME answers
// {"upstream":bytes,"downstream":bytes}, 404 for a proxy without meters.
const MetersPath = "/drill/meters"

// serveMeters answers GET [MetersPath] for a proxy that carries the meter
// toxics (whoever added them: this process's [Embedded.CreateProxy] or a
// [Metered] client in another).
func (e *Embedded) serveMeters(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("proxy")
	px, err := e.server.Collection.Get(name)
	if err != nil || px.Toxics.GetToxic(meterType+"_upstream") == nil || px.Toxics.GetToxic(meterType+"_downstream") == nil {
		http.Error(w, "no traffic meters on proxy "+name, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{
		"upstream":   e.counter(e.meterKey(name, "upstream")).Load(),
		"downstream": e.counter(e.meterKey(name, "downstream")).Load(),
	})
}

// counter is the meter of key, made if the toxic has not made it yet.
func (e *Embedded) counter(key string) *atomic.Int64 {
	v, _ := meterRegistry.LoadOrStore(key, new(atomic.Int64))
	e.mu.Lock()
	e.meters[key] = true
	e.mu.Unlock()
	return v.(*atomic.Int64)
}

// Close stops every proxy (closing all its connections) and the API server.
// Idempotent.
func (e *Embedded) Close() error {
	var err error
	e.once.Do(func() {
		err1 := e.server.Collection.Clear()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err2 := e.http.Shutdown(ctx)
		if errors.Is(err2, context.DeadlineExceeded) {
			err2 = e.http.Close()
		}
		if serr := <-e.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err2 = errors.Join(err2, serr)
		}
		e.mu.Lock()
		for k := range e.meters {
			meterRegistry.Delete(k)
		}
		e.mu.Unlock()
		if err = errors.Join(err1, err2); err != nil {
			err = fmt.Errorf("close embedded toxiproxy: %w", err)
		}
		e.log.Info("embedded toxiproxy stopped", "api", e.APIURL())
	})
	return err
}
