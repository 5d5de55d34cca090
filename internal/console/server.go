// Package console serves the game-day console of a live drill: a page
// (GET /) with the run's clock, phase, faults and controls, plots rendered
// on the server as SVG, the event timeline, and the JSON and Server-Sent
// Events API the page uses (GET /api/state, GET /api/events, POST
// /api/faults/{name}/{start|end|hold|release}, POST /api/stop, POST
// /api/abort, POST /api/annotations). Every request needs the console's
// token (Authorization: Bearer, or the cookie the page sets) except reads
// when the console is opened read-only. The page needs nothing from
// outside the machine: no CDN, no remote font, a small hand-written script.
//
// A Server is bound before the run touches anything ([Listen]), handed
// the run's [control.Control] when load starts ([Server.Attach]) and told
// the outcome when the run is over ([Server.Finish]).
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/runner"
)

// CookieName is the cookie holding the token once the page was opened
// with ?token=.
const CookieName = "drill_console"

// DefaultLabel is the operator label of a token given without one (and of
// the generated token).
const DefaultLabel = "console"

// Options configure a console.
type Options struct {
	// Addr is HOST:PORT to listen on; "" = 127.0.0.1:0 (a free loopback
	// port).
	Addr string
	// TokenFile holds the tokens, one a line: "TOKEN" or "LABEL TOKEN"
	// (blank lines and # comments skipped). Required to listen on a
	// non-loopback address; "" = one fresh random token labelled
	// [DefaultLabel].
	TokenFile string
	// ReadonlyOpen lets GET requests in without a token.
	ReadonlyOpen bool
	// Logger receives the console's logs; nil discards them. Tokens are
	// never logged.
	Logger *slog.Logger
}

// Server is a running console. Its methods are safe for concurrent use.
type Server struct {
	opts     Options
	log      *slog.Logger
	ln       net.Listener
	http     *http.Server
	tokens   []token
	fromFile bool
	hub      *hub
	live     *liveState
	plots    plotCache
	serveErr chan error
	mu       sync.Mutex
	ctl      *control.Control
	final    *Final
	// reportDir holds the run's reports once it is over.
	reportDir string
	stopLive  context.CancelFunc
	liveDone  chan struct{}
	// closeOnce makes Close idempotent; closeErr is its result.
	closeOnce sync.Once
	closeErr  error
}

// token is one accepted token and the operator label it stands for.
type token struct{ label, value string }

// ErrNeedTokenFile is returned by [Listen] for a non-loopback address
// without Options.TokenFile.
var ErrNeedTokenFile = errors.New("a console on a non-loopback address needs --ui-token-file")

// Listen checks the options, reads or makes the token and binds the
// address; it serves nothing about the run until [Server.Attach]. Errors
// (a bad address, a non-loopback address without a token file, an
// unreadable or empty token file, a port in use) are the caller's bad
// usage: nothing of the run has been touched yet.
func Listen(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("console address %q: %w", opts.Addr, err)
	}
	loopback := isLoopback(host)
	if !loopback && opts.TokenFile == "" {
		return nil, fmt.Errorf("console address %q: %w", opts.Addr, ErrNeedTokenFile)
	}
	s := &Server{opts: opts, log: opts.Logger, hub: newHub(), live: newLiveState(), serveErr: make(chan error, 1),
		plots: plotCache{at: map[string]float64{}, svgs: map[string][]byte{}}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if opts.TokenFile != "" {
		if s.tokens, err = readTokens(opts.TokenFile); err != nil {
			return nil, err
		}
		s.fromFile = true
	} else {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("make the console token: %w", err)
		}
		s.tokens = []token{{label: DefaultLabel, value: hex.EncodeToString(b)}}
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("console: listen on %s: %w", opts.Addr, err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.serveErr <- s.http.Serve(ln) }()
	return s, nil
}

// isLoopback reports whether host (a name or an IP, from HOST:PORT) is
// loopback only. An empty host listens on every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readTokens reads a token file (see Options.TokenFile).
func readTokens(path string) ([]token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the console token file: %w", err)
	}
	var out []token
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch len(f) {
		case 1:
			out = append(out, token{label: DefaultLabel, value: f[0]})
		case 2:
			out = append(out, token{label: f[0], value: f[1]})
		default:
			return nil, fmt.Errorf("console token file %s line %d: want TOKEN or LABEL TOKEN", path, i+1)
		}
		if t := out[len(out)-1]; len(t.value) < 16 {
			return nil, fmt.Errorf("console token file %s line %d: a token needs at least 16 characters", path, i+1)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("console token file %s holds no token", path)
	}
	return out, nil
}

// Addr is the address the console listens on (the port resolved).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the console's base URL, http://HOST:PORT/.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/" }

// Announce is the line to print on stderr: the URL with the generated
// token, or, when the tokens came from a file, the URL alone (the token is
// never printed) and a warning when the console is reachable from the
// network.
func (s *Server) Announce() string {
	generated := ""
	if !s.fromFile {
		generated = s.tokens[0].value
	}
	return announce(s.URL(), s.opts, generated)
}

// announce is [Server.Announce] for a console at url; generated is the
// generated token ("" when the tokens came from opts.TokenFile).
func announce(url string, opts Options, generated string) string {
	if generated != "" {
		return fmt.Sprintf("console: %s?token=%s", url, generated)
	}
	host, _, _ := net.SplitHostPort(opts.Addr)
	msg := fmt.Sprintf("console: %s (token from %s)", url, opts.TokenFile)
	if !isLoopback(host) {
		msg += "\nconsole: WARNING: the console is reachable from the network; anyone holding the token can end, start and abort faults"
	}
	return msg
}

// Token returns the first token (tests use it with the generated one).
func (s *Server) Token() string { return s.tokens[0].value }

// who returns the label of the token v, or "" when v matches none.
func (s *Server) who(v string) string {
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t.value), []byte(v)) == 1 {
			return t.label
		}
	}
	return ""
}

// Attach gives the console the live run. It is meant as
// runner.Options.OnLive: it returns at once.
func (s *Server) Attach(c *control.Control) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.mu.Lock()
	s.ctl, s.stopLive, s.liveDone = c, cancel, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.follow(ctx, c)
	}()
}

// Final is the outcome shown once the run is over.
type Final struct {
	// Code is the exit code; Verdict its word (PASS, FAIL, ...).
	Code    int    `json:"code"`
	Verdict string `json:"verdict"`
	// Error explains a code above 0.
	Error string `json:"error,omitempty"`
	// Report is the console's link to report.html ("" when none was written).
	Report string `json:"report,omitempty"`
}

// endMessage is the "end" event: the outcome, and the plots of the run as
// it ended (SVG by plot name: latency, throughput, ready), so that the
// page keeps showing them after the console has closed.
type endMessage struct {
	*Final
	Plots map[string]string `json:"plots,omitempty"`
}

// Finish shows the run's outcome: the verdict, and report.html (served at
// /report) when res.OutDir holds one. The "end" message carries the last
// plots too: without --ui-linger the console closes right after.
func (s *Server) Finish(res runner.Result, runErr error) {
	s.mu.Lock()
	stop, done := s.stopLive, s.liveDone
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	f := &Final{Code: res.Code, Verdict: verdictWord(res.Code)}
	if runErr != nil {
		f.Error = runErr.Error()
	}
	if res.OutDir != "" {
		if _, err := os.Stat(reportPath(res.OutDir)); err == nil {
			f.Report = "/report"
		}
	}
	s.mu.Lock()
	s.final = f
	s.reportDir = res.OutDir
	s.mu.Unlock()
	s.hub.publish("end", endMessage{Final: f, Plots: s.finalPlots()})
}

// verdictWord names an exit code as the summary does.
func verdictWord(code int) string {
	switch code {
	case 0:
		return "PASS"
	case 1:
		return "FAIL"
	case 2:
		return "BAD INPUT"
	case 3:
		return "ABORTED"
	case 4:
		return "INVALID"
	case 5:
		return "CLEANUP UNVERIFIED"
	}
	return fmt.Sprintf("EXIT %d", code)
}

// Close ends every event stream and stops the server, waiting for
// requests in flight until ctx ends. Calls after the first return its
// result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		stop, done := s.stopLive, s.liveDone
		s.mu.Unlock()
		if stop != nil {
			stop()
			<-done
		}
		s.hub.close()
		err := s.http.Shutdown(ctx)
		if serr := <-s.serveErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		s.closeErr = err
	})
	return s.closeErr
}
