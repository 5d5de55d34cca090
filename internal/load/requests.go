package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/drillhq/drill/internal/scenario"
)

// Requests are a stream's requests as drill sends them: its targets
// (inline first, then its targets file's), each with its method, headers
// (basicAuth's Authorization included) and body or body template. The
// load engine sends every hit from them; the runner's warm traffic
// (before t=0, to prove faults are on the traffic path) builds its
// requests with [Requests.Request], so both send the same requests.
type Requests struct {
	targets []vegeta.Target
	tpls    []*bodyTemplate
}

// NewRequests prepares st's requests; st's ${...} references must already
// be expanded ([ExpandStreams]). Relative targetsFile paths are taken from
// dir. Errors name the target and what is wrong (not an absolute http(s)
// URL, a body template that does not parse or render, an unreadable
// targets file, no target at all).
func NewRequests(st scenario.Stream, dir string) (*Requests, error) {
	tgts, tpls, err := buildTargets(st, dir)
	if err != nil {
		return nil, err
	}
	return &Requests{targets: tgts, tpls: tpls}, nil
}

// Len is the number of targets.
func (r *Requests) Len() int { return len(r.targets) }

// Request returns a request for target i (0-based, in [Requests] order)
// with its body template rendered with data. Errors: i out of range, the
// template failed to render.
func (r *Requests) Request(ctx context.Context, i int, data BodyData) (*http.Request, error) {
	if i < 0 || i >= len(r.targets) {
		return nil, fmt.Errorf("target %d: the stream has %d", i, len(r.targets))
	}
	t := r.targets[i]
	hdr := t.Header.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	body := t.Body
	if v := hdr.Get(tplHeader); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= len(r.tpls) {
			return nil, fmt.Errorf("target %d: bad body template marker %q", i, v)
		}
		var buf bytes.Buffer
		if err := r.tpls[n].tpl.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("target %d: body template: %w", i, err)
		}
		body = buf.Bytes()
		hdr.Del(tplHeader)
	}
	req, err := http.NewRequestWithContext(ctx, t.Method, t.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("target %d: %w", i, err)
	}
	req.Header = hdr
	return req, nil
}
