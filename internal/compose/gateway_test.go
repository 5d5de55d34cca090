package compose

import (
	"context"
	"fmt"
	"github.com/drillhq/drill/internal/composefile"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/drillhq/drill/internal/event"
)

// TestGatewayEmptyServices follows Traefik's Docker provider: a container
// that is not a server takes its routers with it (404) unless
// allowEmptyServices keeps them (503); another router still matches.
func TestGatewayEmptyServices(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "api") }))
	defer backend.Close()
	host, port, _ := net.SplitHostPort(backend.Listener.Addr().String())
	labels := map[string]string{
		"traefik.http.routers.api.rule":                      "PathPrefix(`/api`)",
		"traefik.http.services.api.loadbalancer.server.port": port,
	}
	tests := []struct {
		name       string
		allowEmpty bool
		serving    bool
		path       string
		want       int
	}{
		{"serving", false, true, "/api/x", 200},
		{"no router matches", false, true, "/other", 404},
		{"unhealthy drops the router", false, false, "/api/x", 404},
		{"allowEmptyServices keeps it", true, false, "/api/x", 503},
		{"allowEmptyServices serving", true, true, "/api/x", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routes, err := composefile.ParseRoutes(&composefile.Project{Services: []composefile.Service{{Name: "api", Labels: labels}}})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			g := NewGateway(routes, tt.allowEmpty, event.NewClock(), rec, nil)
			c := &Container{Service: "api", Name: "drill-x-api", IP: host}
			g.SetServing(c, true)
			if !tt.serving {
				g.SetServing(c, false)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", "http://gw"+tt.path, nil))
			if w.Code != tt.want {
				t.Errorf("status %d, want %d", w.Code, tt.want)
			}
			kinds := []event.Kind{event.EndpointReady}
			if !tt.serving {
				kinds = append(kinds, event.EndpointRemoved)
			}
			if len(rec.evs) != len(kinds) {
				t.Fatalf("events %+v, want %v", rec.evs, kinds)
			}
			for i, k := range kinds {
				if rec.evs[i].Kind != k || rec.evs[i].Pod != "drill-x-api" || rec.evs[i].Address != net.JoinHostPort(host, port) {
					t.Errorf("event %d = %+v, want %s of drill-x-api", i, rec.evs[i], k)
				}
			}
		})
	}
}

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			return
		}
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if err := Probe(context.Background(), srv.URL+"/ok", 0); err != nil {
		t.Errorf("2xx: %v", err)
	}
	if err := Probe(context.Background(), srv.URL+"/bad", 0); err == nil {
		t.Error("503 passed")
	}
	if err := Probe(context.Background(), "http://127.0.0.1:1/", 0); err == nil {
		t.Error("refused connection passed")
	}
}
