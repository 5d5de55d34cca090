package compose

import (
	"context"
	"errors"
	"fmt"
	"github.com/drillhq/drill/internal/composefile"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// GatewaySource is the event source of route changes.
const GatewaySource = "traefik-rules"

// Gateway is drill's stand-in for Traefik with its Docker provider: it
// routes HTTP requests to the project's containers by the routers and
// services of their labels ([composefile.ParseRoutes]), with the provider's health
// semantics. A container is a server while it runs and is healthy (or has
// no healthcheck); a container that is not one loses its routers too, so a
// request for them gets 404, unless AllowEmptyServices (Traefik's
// --providers.docker.allowEmptyServices) keeps the routers, which then
// answer 503. Each server entering and leaving routing is an event
// (EndpointReady / EndpointRemoved; Service the Compose service, Pod the
// container, Address ip:port) on the run's clock.
type Gateway struct {
	routes     *composefile.Routes
	allowEmpty bool
	clock      *event.Clock
	sink       event.Sink
	log        *slog.Logger

	mu sync.RWMutex
	// serving maps a Compose service (a router's or backend's owner) to its
	// container while that container serves.
	serving map[string]*Container
	// servers maps a Traefik service to a proxy per server it has now:
	// rebuilt by SetServing, so a request only looks it up.
	servers map[string][]*httputil.ReverseProxy
	next    atomic.Uint64

	tr  *http.Transport
	srv *http.Server
	ln  net.Listener
}

// NewGateway returns a gateway for routes; nothing serves until
// [Gateway.SetServing] says so.
func NewGateway(routes *composefile.Routes, allowEmptyServices bool, clock *event.Clock, sink event.Sink, log *slog.Logger) *Gateway {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{routes: routes, allowEmpty: allowEmptyServices, clock: clock, sink: sink, log: log,
		serving: map[string]*Container{}, servers: map[string][]*httputil.ReverseProxy{},
		tr: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		}}
}

// newProxy returns the reverse proxy to one server (addr: ip:port).
func (g *Gateway) newProxy(addr string) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: addr}
	return &httputil.ReverseProxy{
		Transport: g.tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			http.Error(w, http.StatusText(status), status)
		},
	}
}

// Start listens on addr (e.g. 127.0.0.1:0) and serves until Close.
func (g *Gateway) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway listen %s: %w", addr, err)
	}
	g.ln = ln
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Warn("gateway stopped", "err", err)
		}
	}()
	return nil
}

// URL is the gateway's base URL (http://host:port), "" before Start.
func (g *Gateway) URL() string {
	if g.ln == nil {
		return ""
	}
	return "http://" + g.ln.Addr().String()
}

// Close stops serving.
func (g *Gateway) Close(ctx context.Context) error {
	if g.srv == nil {
		return nil
	}
	defer g.tr.CloseIdleConnections()
	if err := g.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("stop gateway: %w", err)
	}
	return nil
}

// SetServing records whether c is a server now and emits the route events
// of each Traefik service its labels define.
func (g *Gateway) SetServing(c *Container, serving bool) {
	g.mu.Lock()
	_, was := g.serving[c.Service]
	if serving {
		g.serving[c.Service] = c
	} else {
		delete(g.serving, c.Service)
	}
	if was != serving || serving {
		g.rebuildLocked()
	}
	g.mu.Unlock()
	if was == serving {
		return
	}
	at := g.clock.Now()
	for _, b := range g.routes.Backends {
		if b.Owner != c.Service {
			continue
		}
		e := event.Event{At: at, Kind: event.EndpointRemoved, Source: GatewaySource, Service: c.Service, Pod: c.Name,
			Address: net.JoinHostPort(c.IP, strconv.Itoa(b.Port)), Detail: "traefik service " + b.Name}
		if serving {
			e.Kind = event.EndpointReady
		}
		g.sink.Emit(e)
	}
}

// rebuildLocked recomputes the servers of every Traefik service from the
// serving containers.
func (g *Gateway) rebuildLocked() {
	clear(g.servers)
	for _, b := range g.routes.Backends {
		if c, ok := g.serving[b.Owner]; ok {
			g.servers[b.Name] = append(g.servers[b.Name], g.newProxy(net.JoinHostPort(c.IP, strconv.Itoa(b.Port))))
		}
	}
}

// ServeHTTP routes r: the highest-priority router that exists and matches
// picks the Traefik service; 404 when none does, 503 when its service has
// no server.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, status := g.pick(r)
	if p == nil {
		http.Error(w, http.StatusText(status), status)
		return
	}
	p.ServeHTTP(w, r)
}

// pick finds r's server, or the status to answer.
func (g *Gateway) pick(r *http.Request) (*httputil.ReverseProxy, int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, rt := range g.routes.Routers {
		if _, ok := g.serving[rt.Owner]; !ok && !g.allowEmpty {
			continue // the provider dropped this container's configuration
		}
		if !rt.Matches(r) {
			continue
		}
		servers := g.servers[rt.Service]
		if len(servers) == 0 {
			return nil, http.StatusServiceUnavailable
		}
		return servers[g.next.Add(1)%uint64(len(servers))], 0
	}
	return nil, http.StatusNotFound
}
