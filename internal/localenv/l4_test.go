package localenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// TestProxyPerConnection: a per-connection Service, through its listener
// and in process (DialVia), balances each new connection round-robin over
// the ready endpoints and keeps a kept-alive connection on its endpoint
// after that endpoint went unready, as kube-proxy does; with no ready
// endpoint a new connection fails (reset by the listener, refused in
// process) while the kept-alive one still answers; Close ends the
// connections it relays.
func TestProxyPerConnection(t *testing.T) {
	backend := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s host=%s", name, r.Host)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	for _, via := range []string{"listener", "in-process"} {
		t.Run(via, func(t *testing.T) {
			p, err := NewProxy("svc", "", PerConnection, event.NewClock(), nil, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// The clients' kept-alive connections are still open:
				// Close waits for them until its context ends.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				defer cancel()
				_ = p.Close(ctx)
			}()
			if !p.BalancesPerConnection() {
				t.Fatal("BalancesPerConnection = false for a PerConnection proxy")
			}
			p.SetEndpoint("svc-0", backend("a"), 0, true)
			p.SetEndpoint("svc-1", backend("b"), 1, true)
			// client returns a transport with at most one connection, so
			// every request of a client shares it.
			client := func() *http.Transport {
				tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
				if via == "in-process" {
					tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
						return p.DialVia(ctx, (&net.Dialer{}).DialContext)
					}
				}
				t.Cleanup(tr.CloseIdleConnections)
				return tr
			}
			get := func(tr *http.Transport) (string, error) {
				req, _ := http.NewRequest("GET", p.URL()+"/x", nil)
				res, err := tr.RoundTrip(req)
				if err != nil {
					return "", err
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				return strings.ReplaceAll(string(b), p.Addr(), "SVC"), err
			}
			must := func(tr *http.Transport) string {
				t.Helper()
				s, err := get(tr)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			c1, c2 := client(), client()
			first, second := must(c1), must(c2)
			if first != "a host=SVC" || second != "b host=SVC" {
				t.Fatalf("two connections reached %q and %q, want a then b (round-robin per connection, Host kept)", first, second)
			}
			for range 3 {
				if got := must(c1); got != first {
					t.Fatalf("kept-alive connection moved from %q to %q", first, got)
				}
			}
			// a goes unready: its kept-alive connection still reaches it;
			// a new connection goes to b.
			p.SetEndpoint("svc-0", p.eps["svc-0"].addr, 0, false)
			if got := must(c1); got != "a host=SVC" {
				t.Errorf("kept-alive connection to the unready endpoint answered %q, want a (kube-proxy keeps established connections)", got)
			}
			if got := must(client()); got != "b host=SVC" {
				t.Errorf("new connection after a went unready reached %q, want b", got)
			}
			// Nothing ready: new connections fail, kept-alive ones answer.
			p.SetEndpoint("svc-1", p.eps["svc-1"].addr, 1, false)
			if got, err := get(client()); err == nil {
				t.Errorf("new connection with no ready endpoint answered %q, want an error", got)
			} else if via == "in-process" && !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("in-process dial with no ready endpoint: %v, want connection refused", err)
			}
			if got := must(c2); got != "b host=SVC" {
				t.Errorf("kept-alive connection to b answered %q after b went unready, want b", got)
			}
		})
	}

	t.Run("close ends relayed connections", func(t *testing.T) {
		p, err := NewProxy("svc", "", PerConnection, event.NewClock(), nil, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		p.SetEndpoint("svc-0", backend("a"), 0, true)
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", p.URL()+"/x", nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(res.Body)
		res.Body.Close() // the connection stays open, idle in tr
		done := make(chan error, 1)
		go func() { done <- p.Close(context.Background()) }()
		select {
		case err := <-done: // the grace ended: Close closed the idle relayed connection
			if err != nil {
				t.Errorf("Close: %v, want nil (closing a client's idle connection is not a failure)", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not return: it waits for a client's idle kept-alive connection")
		}
		req, _ = http.NewRequest("GET", p.URL()+"/x", nil)
		if res, err := tr.RoundTrip(req); err == nil {
			res.Body.Close()
			t.Fatalf("answer %d through a closed Service, want an error", res.StatusCode)
		}
	})
}
