package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/runner"
)

func TestListenTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# facilitators\nalice 0123456789abcdef0123\n\nfedcba9876543210fedc\n")
	for _, c := range []struct {
		name    string
		opts    Options
		wantErr string
		labels  map[string]string // token -> label
	}{
		{"generated", Options{}, "", nil},
		{"from file", Options{TokenFile: good}, "", map[string]string{"0123456789abcdef0123": "alice", "fedcba9876543210fedc": DefaultLabel, "nope-nope-nope-nope": ""}},
		{"network without file", Options{Addr: "0.0.0.0:0"}, "needs --ui-token-file", nil},
		{"empty file", Options{TokenFile: write("empty", "# none\n")}, "holds no token", nil},
		{"three fields", Options{TokenFile: write("three", "a b c\n")}, "want TOKEN or LABEL TOKEN", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Listen(c.opts)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				if c.name == "network without file" && !errors.Is(err, ErrNeedTokenFile) {
					t.Errorf("err %v is not ErrNeedTokenFile", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
				t.Errorf("URL %s, want loopback", s.URL())
			}
			for tok, label := range c.labels {
				if got := s.who(tok); got != label {
					t.Errorf("who(%s) = %q, want %q", tok, got, label)
				}
			}
			a := s.Announce()
			if c.opts.TokenFile == "" && !strings.Contains(a, "?token="+s.Token()) {
				t.Errorf("announce %q lacks the generated token", a)
			}
			if c.opts.TokenFile != "" && strings.Contains(a, s.Token()) {
				t.Errorf("announce %q prints a token read from a file", a)
			}
		})
	}
}

// TestAnnounce checks the line printed on stderr: the generated token in
// the URL, a token from a file never, and a warning off loopback (no
// test binds a non-loopback address).
func TestAnnounce(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      Options
		generated string
		want      []string
		not       []string
	}{
		{"generated", Options{Addr: "127.0.0.1:0"}, "abc123", []string{"console: http://h:1/?token=abc123"}, []string{"WARNING"}},
		{"file on loopback", Options{Addr: "127.0.0.1:8080", TokenFile: "/etc/tok"}, "", []string{"token from /etc/tok"}, []string{"WARNING", "token="}},
		{"file on the network", Options{Addr: "0.0.0.0:8080", TokenFile: "/etc/tok"}, "", []string{"reachable from the network"}, []string{"token="}},
		{"file on every interface", Options{Addr: ":8080", TokenFile: "/etc/tok"}, "", []string{"reachable from the network"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := announce("http://h:1/", c.opts, c.generated)
			for _, w := range c.want {
				if !strings.Contains(a, w) {
					t.Errorf("%q lacks %q", a, w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(a, n) {
					t.Errorf("%q has %q", a, n)
				}
			}
		})
	}
}

// TestBeforeLoad checks the answers while the run is still coming up:
// reads work with the token, commands are 409, the cookie needs the CSRF
// header, read-only open lets reads in but not commands.
func TestBeforeLoad(t *testing.T) {
	s, err := Listen(Options{ReadonlyOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	d := &drill{srv: s}
	if code, body := d.do(t, http.MethodGet, "/api/state", "", nil); code != http.StatusOK || !strings.Contains(string(body), `"phase": "starting"`) {
		t.Errorf("read-only open state: %d %s", code, body)
	}
	if code, _ := d.do(t, http.MethodPost, "/api/stop", "", nil); code != http.StatusUnauthorized {
		t.Errorf("read-only open command without token: %d, want 401", code)
	}
	if code, body := d.do(t, http.MethodPost, "/api/faults/x/end", s.Token(), nil); code != http.StatusConflict || !isJSONError(body) {
		t.Errorf("command before load: %d %s, want 409", code, body)
	}
	// The page's cookie: set by ?token=, needs the CSRF header on POST.
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(s.URL() + "?token=" + s.Token())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("GET /?token=: %s, cookie %+v", resp.Status, cookie)
	}
	for _, c := range []struct {
		csrf bool
		want int
	}{{false, http.StatusForbidden}, {true, http.StatusConflict}} {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"api/stop", nil)
		req.AddCookie(cookie)
		if c.csrf {
			req.Header.Set(CSRFHeader, "1")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST with the cookie, CSRF header %v: %d, want %d", c.csrf, resp.StatusCode, c.want)
		}
	}
	if code, _ := d.do(t, http.MethodGet, "/?token=wrong", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /?token=wrong: %d, want 401", code)
	}
}

// TestEndCarriesLastPlots: the "end" message carries the verdict and the
// three plots of the run as it ended (what the page keeps once the
// console has closed), rendered from the last second the console kept.
func TestEndCarriesLastPlots(t *testing.T) {
	s, err := Listen(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for n := range 5 {
		s.live.setState(control.State{Now: time.Duration(n) * time.Second, Duration: 5 * time.Second,
			Streams:  []control.StreamLive{{Name: "orders", IntendedRate: 50, AchievedRate: 50, P50: 2 * time.Millisecond, P99: 7 * time.Millisecond}},
			Services: []control.ServiceLive{{Name: "api", Ready: 1, Replicas: 2}}})
	}
	d := &drill{srv: s}
	ev := d.events(t)
	ev.waitFor(t, "hello", 5*time.Second, func(m sseMsg) bool { return m.name == "hello" })
	s.Finish(runner.Result{Code: 1}, errors.New("1 assertion failed"))
	m := ev.waitFor(t, "end", 5*time.Second, func(m sseMsg) bool { return m.name == "end" })
	var end struct {
		Final
		Plots map[string]string `json:"plots"`
	}
	if err := json.Unmarshal(m.data, &end); err != nil {
		t.Fatalf("end message: %v", err)
	}
	if end.Verdict != "FAIL" || end.Code != 1 || end.Error != "1 assertion failed" {
		t.Errorf("end message outcome %+v; want FAIL, exit 1, its error", end.Final)
	}
	for name, legend := range map[string]string{"latency": "orders p99", "throughput": "orders completed", "ready": "api"} {
		svg := end.Plots[name]
		if !strings.Contains(svg, "<svg") || !strings.Contains(svg, legend) {
			t.Errorf("end message plot %s: %d bytes, want an SVG with %q", name, len(svg), legend)
		}
	}
}
