package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Metered is a client of an [Embedded] Toxiproxy server that runs in
// another process of the run (drill's Toxiproxy stand-in): the same API
// calls as [Remote], plus the traffic meters, added to every proxy it
// creates and read live from the server's [MetersPath]. Its proxies and
// toxics end with the run (the journal says so).
type Metered struct {
	*Remote
	id string
}

var _ Toxiproxy = (*Metered)(nil)

// NewMetered returns a client for the Embedded server whose API is at url
// and whose meters count under id ([Embedded.MeterID]). It does not
// contact the server.
func NewMetered(url, id string) *Metered {
	return &Metered{Remote: NewRemote(url), id: id}
}

// CreateProxy implements [Toxiproxy]; it also adds the two meter toxics.
func (m *Metered) CreateProxy(ctx context.Context, name, listen, upstream string) (ProxyInfo, error) {
	info, err := m.Remote.CreateProxy(ctx, name, listen, upstream)
	if err != nil {
		return info, err
	}
	if err := addMeters(ctx, m.Remote, m.id, name); err != nil {
		return info, err
	}
	return m.Proxy(ctx, name)
}

// Counters implements [Toxiproxy] with live byte counts read from the
// server's meter endpoint. Errors: the proxy has no meters (it was not
// created through a Metered client: [ErrCountersUnavailable], or
// [ErrProxyNotFound] when it does not exist), the call failed.
func (m *Metered) Counters(ctx context.Context, proxy string) (Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url+MetersPath+"?proxy="+url.QueryEscape(proxy), nil)
	if err != nil {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w", proxy, err)
	}
	res, err := m.http.Do(req)
	if err != nil {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w", proxy, err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		if _, err := m.Proxy(ctx, proxy); err != nil {
			return Counters{}, err
		}
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w (not created by this drill)", proxy, ErrCountersUnavailable)
	}
	if res.StatusCode != http.StatusOK {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %s", proxy, res.Status)
	}
	var c struct{ Upstream, Downstream int64 }
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		return Counters{}, fmt.Errorf("read counters of proxy %s: %w", proxy, err)
	}
	return Counters{Upstream: c.Upstream, Downstream: c.Downstream, Live: true}, nil
}
