package toxiproxyapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
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
