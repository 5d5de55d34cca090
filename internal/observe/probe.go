package observe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/drillhq/drill/internal/event"
)

// SourceProbe is the Event.Source of HTTP probe observer results.
const SourceProbe = "probe"

// Prober polls an HTTP endpoint (scenario observers.probes) and emits one
// [event.ProbeResult] per attempt: Probe is the observer's Name, Address
// the URL, OK true for a status 200-399 within Timeout (the kubelet's rule),
// Value the seconds taken, Detail "HTTP <code>" or the error. At is the
// time the attempt started. Redirects are not followed (as the kubelet
// counts a 3xx as success without following it off-host).
type Prober struct {
	// Name is the observer's name (Event.Probe).
	Name string
	// URL is the absolute http(s) URL to GET.
	URL string
	// Interval between attempt starts; default 1s.
	Interval time.Duration
	// Timeout of one attempt; default 1s.
	Timeout time.Duration
	// Client is the HTTP client; default one that does not follow redirects.
	Client *http.Client
	// Clock stamps the events; required.
	Clock *event.Clock
	// Sink receives the events; required.
	Sink event.Sink
	// Log receives debug logs; default discards.
	Log *slog.Logger
}

// Run probes once immediately, then every Interval until ctx is done; it
// returns nil when ctx ends.
func (p *Prober) Run(ctx context.Context) error {
	p.defaults()
	every(ctx, p.Interval, func() {
		e := p.Probe(ctx)
		if ctx.Err() != nil {
			return
		}
		p.Sink.Emit(e)
	})
	return nil
}

func (p *Prober) defaults() {
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	if p.Timeout <= 0 {
		p.Timeout = time.Second
	}
	if p.Client == nil {
		p.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
}

// Probe makes one attempt and returns its ProbeResult event.
func (p *Prober) Probe(ctx context.Context) event.Event {
	p.defaults()
	e := event.Event{At: p.Clock.Now(), Kind: event.ProbeResult, Source: SourceProbe, Probe: p.Name, Address: p.URL}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		e.Detail = fmt.Sprintf("probe %s: %v", p.URL, err)
		return e
	}
	req.Header.Set("User-Agent", "drill-probe")
	resp, err := p.Client.Do(req)
	if err != nil {
		e.Value = time.Since(start).Seconds()
		e.Detail = err.Error()
		return e
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	e.Value = time.Since(start).Seconds()
	e.OK = resp.StatusCode >= 200 && resp.StatusCode < 400
	e.Detail = fmt.Sprintf("HTTP %d", resp.StatusCode)
	p.Log.Debug("probe", "observer", p.Name, "url", p.URL, "ok", e.OK, "detail", e.Detail)
	return e
}
