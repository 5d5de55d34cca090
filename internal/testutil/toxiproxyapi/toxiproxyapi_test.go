package toxiproxyapi

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// fakeAPI serves the parts of Toxiproxy's API the client uses.
type fakeAPI struct {
	mu      sync.Mutex
	proxies map[string]Proxy
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/proxies":
		_ = json.NewEncoder(w).Encode(f.proxies)
	case r.Method == http.MethodPost && r.URL.Path == "/proxies":
		var p Proxy
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, ok := f.proxies[p.Name]; ok {
			http.Error(w, "proxy already exists", http.StatusConflict)
			return
		}
		p.Listen = strings.Replace(p.Listen, ":0", ":40000", 1)
		f.proxies[p.Name] = p
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(p)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/proxies/"):
		delete(f.proxies, strings.TrimPrefix(r.URL.Path, "/proxies/"))
		w.WriteHeader(http.StatusNoContent)
	default:
		_, _ = io.Copy(io.Discard, r.Body)
		http.NotFound(w, r)
	}
}

func TestClient(t *testing.T) {
	api := &fakeAPI{proxies: map[string]Proxy{
		"db":  {Name: "db", Toxics: []Toxic{{Name: "drill-r1-pause-up"}, {Name: "other"}}},
		"tax": {Name: "tax", Toxics: []Toxic{{Name: "drill-r1-slow"}}},
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	c := &Client{URL: srv.URL}

	p, err := c.CreateProxy("pg", "127.0.0.1:0", "127.0.0.1:5432")
	if err != nil {
		t.Fatal(err)
	}
	if p.Listen != "127.0.0.1:40000" || !p.Enabled {
		t.Fatalf("created %+v; want the listen address the API chose, enabled", p)
	}
	if _, err := c.CreateProxy("pg", "127.0.0.1:0", "x"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("creating a proxy twice: err %v, want the API's 409", err)
	}
	ps, err := c.Proxies()
	if err != nil || len(ps) != 3 {
		t.Fatalf("Proxies = %v, %v; want 3", ps, err)
	}
	got, err := c.Toxics("drill-")
	if want := []string{"db/drill-r1-pause-up", "tax/drill-r1-slow"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Toxics = %q, %v; want %q", got, err, want)
	}
	if err := c.DeleteProxy("pg"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := c.Proxies(); len(ps) != 2 {
		t.Fatalf("after delete: %v", ps)
	}
}

// TestAgainstToxiproxy runs the client against Toxiproxy's own API
// handler (the library drill embeds), so the shapes it decodes are the
// real ones.
func TestAgainstToxiproxy(t *testing.T) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	api := httptest.NewServer(srv.Routes())
	defer api.Close()
	c := &Client{URL: api.URL}

	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	p, err := c.CreateProxy("pg", "127.0.0.1:0", upstream.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled || p.Listen == "127.0.0.1:0" || !strings.HasPrefix(p.Listen, "127.0.0.1:") {
		t.Fatalf("created %+v; want enabled, on the port Toxiproxy chose", p)
	}
	for _, name := range []string{"drill-r1-pause-up", "someone-else"} {
		toxic := map[string]any{"name": name, "type": "latency", "stream": "upstream", "toxicity": 1, "attributes": map[string]any{"latency": 10}}
		if err := c.Call(http.MethodPost, "/proxies/pg/toxics", toxic, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Toxics("drill-")
	if want := []string{"pg/drill-r1-pause-up"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Toxics = %q, %v; want %q", got, err, want)
	}
	if err := c.DeleteProxy("pg"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteProxy("pg"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("deleting a missing proxy: err %v, want the API's 404", err)
	}
}
