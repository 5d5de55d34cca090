// Package toxiproxyapi is the end-to-end tests' client of a toxiproxy-server's
// HTTP API: list proxies with their toxics, create and delete proxies, and
// find the toxics a drill run left. It talks to the API directly (not
// through internal/inject), so a test checks drill's work with a view of
// its own. It imports no drill package.
package toxiproxyapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// CallTimeout bounds each API call.
const CallTimeout = 5 * time.Second

// Client calls the Toxiproxy API at URL (e.g. "http://127.0.0.1:8474").
type Client struct {
	URL string
}

// Proxy is a proxy as the API returns it.
type Proxy struct {
	Name     string  `json:"name"`
	Listen   string  `json:"listen"`
	Upstream string  `json:"upstream"`
	Enabled  bool    `json:"enabled"`
	Toxics   []Toxic `json:"toxics"`
}

// Toxic is a toxic of a [Proxy], by name.
type Toxic struct {
	Name string `json:"name"`
}

// Call sends body (JSON-encoded unless nil) with method to path and decodes
// the answer into out (unless nil). A status of 300 or more is an error
// that carries the answer's body.
func (c *Client) Call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("toxiproxy %s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Proxies lists every proxy with its toxics, by name.
func (c *Client) Proxies() (map[string]Proxy, error) {
	var m map[string]Proxy
	err := c.Call(http.MethodGet, "/proxies", nil, &m)
	return m, err
}

// CreateProxy creates an enabled proxy and returns it as the API does (with
// the address it listens on when listen asked for port 0).
func (c *Client) CreateProxy(name, listen, upstream string) (Proxy, error) {
	var p Proxy
	err := c.Call(http.MethodPost, "/proxies", map[string]any{
		"name": name, "listen": listen, "upstream": upstream, "enabled": true,
	}, &p)
	return p, err
}

// DeleteProxy deletes the proxy named name.
func (c *Client) DeleteProxy(name string) error {
	return c.Call(http.MethodDelete, "/proxies/"+name, nil, nil)
}

// Toxics lists every toxic whose name starts with prefix, as "proxy/toxic",
// sorted.
func (c *Client) Toxics(prefix string) ([]string, error) {
	ps, err := c.Proxies()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		for _, x := range p.Toxics {
			if strings.HasPrefix(x.Name, prefix) {
				out = append(out, p.Name+"/"+x.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
