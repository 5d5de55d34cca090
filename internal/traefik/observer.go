package traefik

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/event"
)

// Logs is the part of the Engine API client the observer uses.
type Logs interface {
	ContainerLogs(ctx context.Context, id string, options client.ContainerLogsOptions) (client.ContainerLogsResult, error)
}

// Server is one Compose service's container as a Traefik server: Pod its
// container name, Address ip:port.
type Server struct {
	Service, Pod, Address string
}

// Config is what an [Observer] needs.
type Config struct {
	// Docker reads the Traefik container's log; Container is its id.
	Docker    Logs
	Container string
	// API is the base URL of Traefik's API (http://ip:8080), Entry the base
	// URL of the entry point the load goes through.
	API, Entry string
	// Routes are the routers and services of the project's labels: they
	// name which Compose service a 404 request was meant for.
	Routes *composefile.Routes
	// Servers maps a Compose service to its container.
	Servers map[string]Server
	// Clock is the run's clock, Sink its event log.
	Clock *event.Clock
	Sink  event.Sink
	Log   *slog.Logger
	// Poll is how often the API is read; default 250 ms.
	Poll time.Duration
	// ProbePath prefixes the paths of the clock probes; default
	// /.drill-clock/ (no router should match it).
	ProbePath string
}

// Offset is how Traefik's wall clock maps onto the run's clock: an access
// log time t is at Clock.Offset(t) + Shift. Error bounds it: half the
// round trip of the probe it was measured with (Traefik stamped StartUTC
// somewhere between drill's send and its answer).
type Offset struct {
	Shift, Error time.Duration
	// Probes is how many probe requests were sent.
	Probes int
}

// Metric names of the per-second counts [Observer.Close] emits.
const (
	MetricNoRouter = event.MetricTraefikNoRouter
	MetricNoServer = event.MetricTraefikNoServer
)

type latestKey struct {
	service string
	in      bool
}

type secondKey struct {
	service string
	metric  string
	second  int64
}

// Counts are the access log's requests by what they show.
type Counts struct {
	Entries, Forwarded, NoRouter, NoServer, Other int64
}

// Observer follows one Traefik. Safe for concurrent use.
type Observer struct {
	cfg  Config
	http *http.Client

	mu     sync.Mutex
	offset *Offset
	probes map[string]chan time.Time
	state  map[string]bool          // Compose service -> requests reach it
	lastAt map[string]time.Duration // last transition per Compose service
	// latest holds, per Compose service and state (true: forwarded),
	// the latest start of a logged request in that state: the lower
	// bound of the next change (the "since" label).
	latest   map[latestKey]time.Duration
	api      map[string]string // Traefik service -> last API status
	apiOK    bool              // the last poll read the API
	apiEver  bool              // a poll read the API
	apiSince time.Time         // first failed poll of the current failing streak
	problems []string
	counts   Counts
	// perSecond counts, per Compose service and second of the run's clock
	// (by StartUTC), the requests Traefik answered itself.
	perSecond map[secondKey]int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start begins following the access log and polling the API until
// [Observer.Close].
func Start(ctx context.Context, cfg Config) *Observer {
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.ProbePath == "" {
		cfg.ProbePath = "/.drill-clock/"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o := &Observer{cfg: cfg, http: &http.Client{Timeout: 2 * time.Second},
		probes: map[string]chan time.Time{}, state: map[string]bool{}, lastAt: map[string]time.Duration{},
		latest: map[latestKey]time.Duration{}, api: map[string]string{}, perSecond: map[secondKey]int64{}, cancel: cancel}
	o.wg.Add(2)
	go o.follow(ctx)
	go o.poll(ctx)
	return o
}

// Close stops the observer and returns the access log's counts and the
// problems that make the run's measurement invalid (the API or the
// access log could not be read), one sentence each.
func (o *Observer) Close() (Counts, []string) {
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.offset == nil {
		o.problems = append(o.problems, "Traefik's access log: the clock probes never appeared in it, so its times could not be put on the run's clock")
	}
	if !o.apiEver {
		o.problems = append(o.problems, fmt.Sprintf("Traefik's API (%s): never readable during the run", o.cfg.API))
	} else if !o.apiSince.IsZero() {
		o.problems = append(o.problems, fmt.Sprintf("Traefik's API (%s): unreadable from %s to the end of the run", o.cfg.API, o.apiSince.Format(time.RFC3339)))
	}
	keys := make([]secondKey, 0, len(o.perSecond))
	for k := range o.perSecond {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.second != b.second {
			return a.second < b.second
		}
		if a.service != b.service {
			return a.service < b.service
		}
		return a.metric < b.metric
	})
	for _, k := range keys {
		o.cfg.Sink.Emit(event.Event{At: time.Duration(k.second) * time.Second, Kind: event.Metric, Source: SourceAccessLog,
			Service: k.service, Metric: k.metric, Value: float64(o.perSecond[k])})
	}
	c := o.counts
	at := o.cfg.Clock.Now()
	o.cfg.Sink.Emit(event.Event{At: at, Kind: event.Note, Source: SourceAccessLog,
		Labels: map[string]string{"entries": fmt.Sprint(c.Entries), "forwarded": fmt.Sprint(c.Forwarded),
			"no-router-404": fmt.Sprint(c.NoRouter), "no-server-5xx": fmt.Sprint(c.NoServer)},
		Detail: fmt.Sprintf("Traefik's access log: %d requests, %d forwarded to a server, %d answered 404 by Traefik with no router, %d answered 5xx by Traefik with no server", c.Entries, c.Forwarded, c.NoRouter, c.NoServer)})
	return c, append([]string(nil), o.problems...)
}

// Offset returns the measured offset, nil before [Observer.Sync] succeeded.
func (o *Observer) Offset() *Offset {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.offset
}

// Sync measures the offset of Traefik's clock: it sends n probe requests
// (GET ProbePath+id, which no router matches) through the entry point,
// each timed on the run's clock, waits for each one's access log entry
// and keeps the one with the shortest round trip. It fails when no probe's
// entry appears within timeout: the access log is not readable.
func (o *Observer) Sync(ctx context.Context, n int, timeout time.Duration) (*Offset, error) {
	best := (*Offset)(nil)
	for i := range n {
		id := fmt.Sprintf("%d-%d", time.Now().UnixNano(), i)
		ch := make(chan time.Time, 1)
		o.mu.Lock()
		o.probes[id] = ch
		o.mu.Unlock()
		t0 := o.cfg.Clock.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.cfg.Entry+o.cfg.ProbePath+id, nil)
		if err != nil {
			return nil, fmt.Errorf("clock probe: %w", err)
		}
		resp, err := o.http.Do(req)
		t1 := o.cfg.Clock.Now()
		if err != nil {
			return nil, fmt.Errorf("clock probe through Traefik's entry point %s: %w", o.cfg.Entry, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		select {
		case start := <-ch:
			mid := t0 + (t1-t0)/2
			off := &Offset{Shift: mid - o.cfg.Clock.Offset(start), Error: (t1 - t0) / 2, Probes: n}
			if best == nil || off.Error < best.Error {
				best = off
			}
		case <-time.After(timeout):
			return nil, fmt.Errorf("traefik's access log: no entry for clock probe %s within %s (is --accesslog.format=json on standard output, unbuffered?)", o.cfg.ProbePath+id, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	o.mu.Lock()
	o.offset = best
	o.mu.Unlock()
	o.cfg.Sink.Emit(event.Event{At: o.cfg.Clock.Now(), Kind: event.Note, Source: SourceAccessLog, Value: best.Shift.Seconds(),
		Detail: fmt.Sprintf("Traefik's access log times put on the run's clock: offset %s ± %s (best of %d probes through the entry point)", best.Shift, best.Error, n)})
	return best, nil
}

// follow reads the container's log until ctx ends.
func (o *Observer) follow(ctx context.Context) {
	defer o.wg.Done()
	rc, err := o.cfg.Docker.ContainerLogs(ctx, o.cfg.Container, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		o.problem(fmt.Sprintf("Traefik's access log: cannot follow the container's log: %v", err))
		return
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, rc)
		pw.CloseWithError(err)
	}()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if e, ok := ParseEntry(sc.Bytes()); ok {
			o.entry(e)
		}
	}
	if ctx.Err() == nil {
		o.problem(fmt.Sprintf("Traefik's access log: the container's log ended during the run (%v)", sc.Err()))
	}
}

func (o *Observer) problem(p string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.problems = append(o.problems, p)
	o.cfg.Log.Warn(p)
}

// entry takes one access log entry.
func (o *Observer) entry(e Entry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id, ok := strings.CutPrefix(e.RequestPath, o.cfg.ProbePath); ok {
		if ch := o.probes[id]; ch != nil {
			ch <- e.StartUTC
			delete(o.probes, id)
		}
		return
	}
	o.counts.Entries++
	v := Classify(e)
	switch v {
	case Forwarded:
		o.counts.Forwarded++
	case NoRouter:
		o.counts.NoRouter++
	case NoServer:
		o.counts.NoServer++
	default:
		o.counts.Other++
		return
	}
	if o.offset == nil {
		return // before Sync: its times cannot be placed yet
	}
	owner := o.owner(e, v)
	if owner == "" {
		return
	}
	at := o.cfg.Clock.Offset(e.StartUTC) + o.offset.Shift
	if v != Forwarded {
		sec := at / time.Second
		if at < 0 && at%time.Second != 0 {
			sec-- // floor
		}
		metric := MetricNoRouter
		if v == NoServer {
			metric = MetricNoServer
		}
		o.perSecond[secondKey{service: owner, metric: metric, second: int64(sec)}]++
	}
	in := v == Forwarded
	// The latest request of the other state logged so far: the change
	// happened after it. (A request that started later and ended after
	// this one is not logged yet, so the bound can only be earlier than
	// the true one, never later.)
	other, haveOther := o.latest[latestKey{owner, !in}]
	if l, ok := o.latest[latestKey{owner, in}]; !ok || at > l {
		o.latest[latestKey{owner, in}] = at
	}
	cur, seen := o.state[owner]
	if seen && cur == in || !seen && !in {
		o.state[owner] = in
		return
	}
	// Entries are written when a request ends: one that started before
	// the last change and ended after it says nothing new.
	if last, ok := o.lastAt[owner]; ok && at <= last {
		return
	}
	o.state[owner] = in
	o.lastAt[owner] = at
	srv := o.cfg.Servers[owner]
	// The path only: a query string may carry a scenario's secret, and
	// the event reaches run.json and the report.
	path, _, _ := strings.Cut(e.RequestPath, "?")
	ev := event.Event{At: at, Kind: event.EndpointReady, Source: SourceAccessLog, Service: owner, Pod: srv.Pod, Address: srv.Address,
		Labels: map[string]string{"router": BareName(e.RouterName), "status": fmt.Sprint(e.DownstreamStatus)}}
	if haveOther && other <= at {
		ev.Labels[LabelSince] = strconv.FormatInt(int64(other), 10)
	}
	switch v {
	case Forwarded:
		ev.Detail = fmt.Sprintf("Traefik forwarded %s %s through router %s (origin answered %d)", e.RequestMethod, path, e.RouterName, e.OriginStatus)
	case NoRouter:
		ev.Kind = event.EndpointRemoved
		ev.Reason = "no router"
		ev.Detail = fmt.Sprintf("Traefik answered %s %s with 404: no router matched (the Docker provider dropped %s's routers)", e.RequestMethod, path, owner)
	case NoServer:
		ev.Kind = event.EndpointRemoved
		ev.Reason = "no server"
		ev.Detail = fmt.Sprintf("Traefik answered %s %s with %d itself: router %s's service has no server", e.RequestMethod, path, e.DownstreamStatus, e.RouterName)
	}
	o.cfg.Sink.Emit(ev)
}

// owner names the Compose service an entry concerns: the owner of its
// router, or, for a request no router matched, of the router of the
// project's labels whose rule matches it.
func (o *Observer) owner(e Entry, v Verdict) string {
	if v != NoRouter {
		name := BareName(e.RouterName)
		for _, r := range o.cfg.Routes.Routers {
			if r.Name == name {
				return r.Owner
			}
		}
		return ""
	}
	u := &url.URL{Path: e.RequestPath}
	if p, err := url.ParseRequestURI(e.RequestPath); err == nil {
		u = p
	}
	req := &http.Request{Method: e.RequestMethod, URL: u, Host: e.RequestHost, Header: http.Header{}}
	for _, r := range o.cfg.Routes.Routers {
		if r.Matches(req) {
			return r.Owner
		}
	}
	return ""
}

// apiService is the part of /api/http/services drill reads.
type apiService struct {
	Name         string            `json:"name"`
	ServerStatus map[string]string `json:"serverStatus"`
	LoadBalancer *struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
	} `json:"loadBalancer"`
}

// apiRouter is the part of /api/http/routers drill reads.
type apiRouter struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	Status  string `json:"status"`
}

// Status is one poll of the API: each Traefik service of the labels as
// "up" (a server UP), "no server" (present, none up) or "absent", and
// the routers present.
type Status struct {
	Services map[string]string
	Routers  []string
}

// Read polls the API once.
func (o *Observer) Read(ctx context.Context) (Status, error) {
	var svcs []apiService
	if err := o.get(ctx, "/api/http/services", &svcs); err != nil {
		return Status{}, err
	}
	var rts []apiRouter
	if err := o.get(ctx, "/api/http/routers", &rts); err != nil {
		return Status{}, err
	}
	st := Status{Services: map[string]string{}}
	for _, b := range o.cfg.Routes.Backends {
		st.Services[b.Name] = "absent"
	}
	for _, s := range svcs {
		n := BareName(s.Name)
		if _, ours := st.Services[n]; !ours || !strings.HasSuffix(s.Name, "@docker") {
			continue
		}
		// A server counts with a URL: with allowEmptyServices, an
		// unhealthy container whose labels set the server's port leaves
		// a server without one ({}, status UP) that answers 500.
		up := false
		for u, v := range s.ServerStatus {
			up = up || u != "" && v == "UP"
		}
		if s.ServerStatus == nil && s.LoadBalancer != nil {
			for _, sv := range s.LoadBalancer.Servers {
				up = up || sv.URL != ""
			}
		}
		st.Services[n] = "no server"
		if up {
			st.Services[n] = "up"
		}
	}
	for _, r := range rts {
		if r.Status == "enabled" {
			st.Routers = append(st.Routers, r.Name)
		}
	}
	sort.Strings(st.Routers)
	return st, nil
}

func (o *Observer) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.cfg.API+path, nil)
	if err != nil {
		return err
	}
	resp, err := o.http.Do(req)
	if err != nil {
		return fmt.Errorf("traefik's API %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("traefik's API %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("traefik's API %s: %w", path, err)
	}
	return nil
}

// WaitUp polls the API until every Traefik service of the labels is up
// (what drill's up --wait adds for Traefik: the provider has seen the
// healthy containers), or ctx ends.
func (o *Observer) WaitUp(ctx context.Context) error {
	var last error
	for {
		st, err := o.Read(ctx)
		if err == nil {
			all := true
			for n, s := range st.Services {
				if s != "up" {
					all = false
					last = fmt.Errorf("traefik service %s is %s", n, s)
				}
			}
			if all {
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("traefik not routing: %w", errors.Join(ctx.Err(), last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// poll reads the API every Poll until ctx ends, emitting a note per change.
func (o *Observer) poll(ctx context.Context) {
	defer o.wg.Done()
	t := time.NewTicker(o.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := o.cfg.Clock.Now()
		st, err := o.Read(ctx)
		o.mu.Lock()
		if err != nil {
			// Failures count from the first successful read on: Traefik
			// takes a moment to serve its API after its start.
			if ctx.Err() == nil && o.apiEver && o.apiSince.IsZero() {
				o.apiSince = time.Now()
			}
			o.apiOK = false
			o.cfg.Log.Debug("Traefik API poll failed", "err", err)
			o.mu.Unlock()
			continue
		}
		if !o.apiSince.IsZero() {
			if gap := time.Since(o.apiSince); gap > 2*time.Second {
				o.problems = append(o.problems, fmt.Sprintf("Traefik's API (%s): unreadable for %s from %s", o.cfg.API, gap.Round(time.Millisecond), o.apiSince.Format(time.RFC3339)))
			}
		}
		o.apiEver = true
		o.apiOK, o.apiSince = true, time.Time{}
		names := make([]string, 0, len(st.Services))
		for n := range st.Services {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			s := st.Services[n]
			if o.api[n] == s {
				continue
			}
			o.api[n] = s
			owner := ""
			for _, b := range o.cfg.Routes.Backends {
				if b.Name == n {
					owner = b.Owner
				}
			}
			o.cfg.Sink.Emit(event.Event{At: at, Kind: event.Note, Source: SourceAPI, Service: owner,
				Labels: map[string]string{"traefik-service": n, "status": s},
				Detail: fmt.Sprintf("Traefik's API: service %s@docker %s (routers %s)", n, s, strings.Join(st.Routers, ", "))})
		}
		o.mu.Unlock()
	}
}
