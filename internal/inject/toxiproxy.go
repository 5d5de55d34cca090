package inject

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Toxiproxy is the part of a Toxiproxy server drill uses. Two
// implementations: [Embedded] (a server inside drill on loopback) and
// [Remote] (an HTTP API at a URL, e.g. in front of a staging dependency).
//
// Every call is bounded: it returns when ctx ends or after
// [DefaultCallTimeout], whichever comes first, even if the server hangs
// (removing a toxic from a busy link can hang Toxiproxy's API).
// Implementations are safe for concurrent use.
type Toxiproxy interface {
	// APIURL is the HTTP API base, e.g. http://127.0.0.1:8474.
	APIURL() string
	// CreateProxy creates and enables a proxy. listen "" means
	// 127.0.0.1:0. The returned Listen is the resolved address.
	// A proxy of that name that exists already gives [ErrProxyExists].
	CreateProxy(ctx context.Context, name, listen, upstream string) (ProxyInfo, error)
	// Proxy reads one proxy with its toxics; [ErrProxyNotFound] if absent.
	Proxy(ctx context.Context, name string) (ProxyInfo, error)
	// Proxies reads every proxy with its toxics, by name.
	Proxies(ctx context.Context) (map[string]ProxyInfo, error)
	// DeleteProxy stops a proxy (closing its connections) and deletes it.
	DeleteProxy(ctx context.Context, name string) error
	// SetEnabled enables or disables a proxy. Disabling closes the listener
	// and every connection ("down").
	SetEnabled(ctx context.Context, name string, enabled bool) error
	// AddToxic adds a toxic to a proxy. It takes effect on existing
	// connections too. [ErrToxicExists] if the name is taken.
	AddToxic(ctx context.Context, proxy string, t Toxic) error
	// RemoveToxic removes a toxic; [ErrToxicNotFound] if absent.
	RemoveToxic(ctx context.Context, proxy, toxic string) error
	// Toxics lists a proxy's toxics.
	Toxics(ctx context.Context, proxy string) ([]Toxic, error)
	// Counters reads the bytes that passed through a proxy so far.
	// [ErrCountersUnavailable] when the server does not expose them.
	Counters(ctx context.Context, proxy string) (Counters, error)
}

// ProxyInfo is a proxy as the server reports it.
type ProxyInfo struct {
	Name string `json:"name"`
	// Listen is the resolved listen address (host:port).
	Listen   string  `json:"listen"`
	Upstream string  `json:"upstream"`
	Enabled  bool    `json:"enabled"`
	Toxics   []Toxic `json:"toxics,omitempty"`
}

// Toxic is one toxic in Toxiproxy's own units (see [Fault] conversions):
// latency/jitter/timeout/delay in ms (slicer delay in µs), rate in KB/s,
// sizes and bytes in bytes.
type Toxic struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Stream is "upstream" (client->server bytes) or "downstream".
	Stream string `json:"stream"`
	// Toxicity is the probability 0..1 that a connection is affected,
	// rolled once per connection and direction. Always sent explicitly:
	// Toxiproxy stores 0 as "never" (Toxiproxy v2.12, found by testing).
	Toxicity   float64        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// Counters are byte totals of one proxy since it was created.
// Embedded: counted live as chunks pass. Remote: Toxiproxy's
// toxiproxy_proxy_{received,sent}_bytes_total, which the server adds when a
// connection closes, so open pooled connections do not move them.
type Counters struct {
	// Upstream is client->server bytes, Downstream server->client bytes.
	Upstream, Downstream int64
	// Live says the counters move while connections stay open.
	Live bool
}

// Total is Upstream + Downstream in bytes.
func (c Counters) Total() int64 { return c.Upstream + c.Downstream }

// DefaultCallTimeout bounds each Toxiproxy API call whose context has no
// earlier deadline.
const DefaultCallTimeout = 10 * time.Second

// Sentinel errors of [Toxiproxy] calls.
var (
	ErrProxyExists         = errors.New("proxy already exists")
	ErrProxyNotFound       = errors.New("proxy not found")
	ErrToxicExists         = errors.New("toxic already exists")
	ErrToxicNotFound       = errors.New("toxic not found")
	ErrCountersUnavailable = errors.New("traffic counters unavailable (start toxiproxy-server with -proxy-metrics)")
	// ErrCallTimeout means the server did not answer within the call's bound.
	ErrCallTimeout = errors.New("toxiproxy did not answer in time")
)

// bounded runs fn (a blocking call without context support) and returns its
// result, or an error wrapping ctx's error or [ErrCallTimeout] when the bound
// passes first. fn keeps running in the background until it returns on its
// own (the v2 client's HTTP timeout ends it after 30 s at worst).
func bounded[T any](ctx context.Context, what string, fn func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return zero, fmt.Errorf("%s: %w (%w)", what, ErrCallTimeout, ctx.Err())
		}
		return zero, fmt.Errorf("%s: %w", what, ctx.Err())
	}
}
