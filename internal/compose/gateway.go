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
	next    atomic.Uint64

	proxy *httputil.ReverseProxy
	srv   *http.Server
	ln    net.Listener
}

// NewGateway returns a gateway for routes; nothing serves until
// [Gateway.SetServing] says so.
func NewGateway(routes *composefile.Routes, allowEmptyServices bool, clock *event.Clock, sink event.Sink, log *slog.Logger) *Gateway {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{routes: routes, allowEmpty: allowEmptyServices, clock: clock, sink: sink, log: log,
		serving: map[string]*Container{}}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	g.proxy = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			http.Error(w, http.StatusText(status), status)
		},
	}
	return g
}

type targetKey struct{}

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

// ServeHTTP routes r: the highest-priority router that exists and matches
// picks the Traefik service; 404 when none does, 503 when its service has
// no server.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target, status := g.pick(r)
	if target == nil {
		http.Error(w, http.StatusText(status), status)
		return
	}
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
}

// pick finds r's server, or the status to answer.
func (g *Gateway) pick(r *http.Request) (*url.URL, int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, rt := range g.routes.Routers {
		if _, ok := g.serving[rt.Owner]; !ok && !g.allowEmpty {
			continue // the provider dropped this container's configuration
		}
		if !rt.Matches(r) {
			continue
		}
		var servers []*url.URL
		for _, b := range g.routes.Backends {
			if b.Name != rt.Service {
				continue
			}
			if c, ok := g.serving[b.Owner]; ok {
				servers = append(servers, &url.URL{Scheme: "http", Host: net.JoinHostPort(c.IP, strconv.Itoa(b.Port))})
			}
		}
		if len(servers) == 0 {
			return nil, http.StatusServiceUnavailable
		}
		return servers[g.next.Add(1)%uint64(len(servers))], 0
	}
	return nil, http.StatusNotFound
}
