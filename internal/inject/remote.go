package inject

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Remote is a Toxiproxy reached through its HTTP API with the v2 client
// package. Each call is bounded (see [Toxiproxy]).
type Remote struct {
	url    string
	client *toxiclient.Client
	http   *http.Client
}

var _ Toxiproxy = (*Remote)(nil)

// NewRemote returns a client for the Toxiproxy API at url
// ("http://host:8474"; a bare "host:port" gets http:// prepended). It does
// not contact the server.
func NewRemote(url string) *Remote {
	url = strings.TrimRight(url, "/")
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		url = "http://" + url
	}
	c := toxiclient.NewClient(url)
	c.UserAgent = "drill"
	return &Remote{url: url, client: c, http: &http.Client{Timeout: DefaultCallTimeout}}
}

// APIURL returns the API base URL.
func (r *Remote) APIURL() string { return r.url }

// mapAPIError turns the client's *ApiError into drill's sentinels.
func mapAPIError(err error, notFound, exists error) error {
	var ae *toxiclient.ApiError
	if errors.As(err, &ae) {
		switch {
		case ae.Status == http.StatusNotFound && notFound != nil:
			return fmt.Errorf("%w: %w", notFound, err)
		case ae.Status == http.StatusConflict && exists != nil:
			return fmt.Errorf("%w: %w", exists, err)
		}
	}
	return err
}

func fromClientProxy(p *toxiclient.Proxy) ProxyInfo {
	info := ProxyInfo{Name: p.Name, Listen: p.Listen, Upstream: p.Upstream, Enabled: p.Enabled}
	for _, t := range p.ActiveToxics {
		info.Toxics = append(info.Toxics, fromClientToxic(t))
	}
	return info
}

func fromClientToxic(t toxiclient.Toxic) Toxic {
	return Toxic{Name: t.Name, Type: t.Type, Stream: t.Stream, Toxicity: float64(t.Toxicity), Attributes: t.Attributes}
}

// CreateProxy implements [Toxiproxy].
func (r *Remote) CreateProxy(ctx context.Context, name, listen, upstream string) (ProxyInfo, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	p, err := bounded(ctx, "create proxy "+name, func() (*toxiclient.Proxy, error) {
		return r.client.CreateProxy(name, listen, upstream)
	})
	if err != nil {
		return ProxyInfo{}, fmt.Errorf("create proxy %s: %w", name, mapAPIError(err, nil, ErrProxyExists))
	}
	return fromClientProxy(p), nil
}

func (r *Remote) proxy(ctx context.Context, name string) (*toxiclient.Proxy, error) {
	p, err := bounded(ctx, "read proxy "+name, func() (*toxiclient.Proxy, error) { return r.client.Proxy(name) })
	if err != nil {
		return nil, fmt.Errorf("read proxy %s: %w", name, mapAPIError(err, ErrProxyNotFound, nil))
	}
	return p, nil
}

// Proxy implements [Toxiproxy].
func (r *Remote) Proxy(ctx context.Context, name string) (ProxyInfo, error) {
	p, err := r.proxy(ctx, name)
	if err != nil {
		return ProxyInfo{}, err
	}
	return fromClientProxy(p), nil
}

// Proxies implements [Toxiproxy].
func (r *Remote) Proxies(ctx context.Context) (map[string]ProxyInfo, error) {
	ps, err := bounded(ctx, "list proxies", r.client.Proxies)
	if err != nil {
		return nil, fmt.Errorf("list proxies at %s: %w", r.url, err)
	}
	out := make(map[string]ProxyInfo, len(ps))
	for name, p := range ps {
		out[name] = fromClientProxy(p)
	}
	return out, nil
}

// DeleteProxy implements [Toxiproxy].
func (r *Remote) DeleteProxy(ctx context.Context, name string) error {
	p := r.client.NewProxy()
	p.Name = name
	_, err := bounded(ctx, "delete proxy "+name, func() (struct{}, error) { return struct{}{}, p.Delete() })
	if err != nil {
		return fmt.Errorf("delete proxy %s: %w", name, mapAPIError(err, ErrProxyNotFound, nil))
	}
	return nil
}

// SetEnabled implements [Toxiproxy].
func (r *Remote) SetEnabled(ctx context.Context, name string, enabled bool) error {
	p, err := r.proxy(ctx, name)
	if err != nil {
		return err
	}
	verb := "disable"
	op := p.Disable
	if enabled {
		verb, op = "enable", p.Enable
	}
	if _, err := bounded(ctx, verb+" proxy "+name, func() (struct{}, error) { return struct{}{}, op() }); err != nil {
		return fmt.Errorf("%s proxy %s: %w", verb, name, mapAPIError(err, ErrProxyNotFound, nil))
	}
	return nil
}

// AddToxic implements [Toxiproxy].
func (r *Remote) AddToxic(ctx context.Context, proxy string, t Toxic) error {
	_, err := bounded(ctx, "add toxic "+t.Name, func() (*toxiclient.Toxic, error) {
		return r.client.AddToxic(&toxiclient.ToxicOptions{
			ProxyName: proxy, ToxicName: t.Name, ToxicType: t.Type, Stream: t.Stream,
			Toxicity: float32(t.Toxicity), Attributes: t.Attributes,
		})
	})
	if err != nil {
		return fmt.Errorf("add toxic %s to proxy %s: %w", t.Name, proxy, mapAPIError(err, ErrProxyNotFound, ErrToxicExists))
	}
	return nil
}

// RemoveToxic implements [Toxiproxy].
func (r *Remote) RemoveToxic(ctx context.Context, proxy, toxic string) error {
	_, err := bounded(ctx, "remove toxic "+toxic, func() (struct{}, error) {
		return struct{}{}, r.client.RemoveToxic(&toxiclient.ToxicOptions{ProxyName: proxy, ToxicName: toxic})
	})
	if err != nil {
		return fmt.Errorf("remove toxic %s from proxy %s: %w", toxic, proxy, mapAPIError(err, ErrToxicNotFound, nil))
	}
	return nil
}

// Toxics implements [Toxiproxy].
func (r *Remote) Toxics(ctx context.Context, proxy string) ([]Toxic, error) {
	p := r.client.NewProxy()
	p.Name = proxy
	ts, err := bounded(ctx, "list toxics of "+proxy, p.Toxics)
	if err != nil {
		return nil, fmt.Errorf("list toxics of proxy %s: %w", proxy, mapAPIError(err, ErrProxyNotFound, nil))
	}
	out := make([]Toxic, 0, len(ts))
	for _, t := range ts {
		out = append(out, fromClientToxic(t))
	}
	return out, nil
}

// Counters implements [Toxiproxy] from the server's /metrics (Toxiproxy
// adds a connection's bytes when it closes). [ErrCountersUnavailable] when
// the server runs without -proxy-metrics.
func (r *Remote) Counters(ctx context.Context, proxy string) (Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/metrics", nil)
	if err != nil {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w", proxy, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := r.http.Do(req)
	if err != nil {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w", proxy, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w", proxy, ErrCountersUnavailable)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Counters{}, fmt.Errorf("read counters of proxy %s: HTTP %d: %s", proxy, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return Counters{}, fmt.Errorf("parse counters of proxy %s: %w", proxy, err)
	}
	return countersFrom(fams, proxy)
}

// countersFrom sums toxiproxy_proxy_received_bytes_total for one proxy by
// direction: what the proxy received on the upstream direction came from the
// client, on downstream from the server.
func countersFrom(fams map[string]*dto.MetricFamily, proxy string) (Counters, error) {
	fam, ok := fams["toxiproxy_proxy_received_bytes_total"]
	if !ok {
		if _, sent := fams["toxiproxy_proxy_sent_bytes_total"]; !sent {
			// Families appear after the first closed connection when
			// metrics are on; without any we cannot tell the two apart.
			return Counters{}, nil
		}
	}
	var c Counters
	if fam == nil {
		return c, nil
	}
	for _, m := range fam.GetMetric() {
		var dir, name string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "direction":
				dir = l.GetValue()
			case "proxy":
				name = l.GetValue()
			}
		}
		if name != proxy {
			continue
		}
		v := int64(m.GetCounter().GetValue())
		if dir == "upstream" {
			c.Upstream += v
		} else {
			c.Downstream += v
		}
	}
	return c, nil
}
