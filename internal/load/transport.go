package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/sleep"
)

// noConnection ends the error text of a request whose timeout fired while
// its connection was still being opened (see transport.RoundTrip), so that
// classify can tell a dial timeout from a slow response.
const noConnection = "no connection was made within the timeout"

// classify maps a vegeta Result.Error of a request that got no response to
// a measure error kind. vegeta only keeps the error text, so this matches
// the messages of net/http and the kernel: a failed dial ("dial tcp ...")
// is refused, a dial timeout or unreachable; a closed connection ("EOF")
// counts as a reset; a socket drill could not open for want of file
// descriptors ("too many open files") is the generator's own failure.
func classify(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "too many open files"):
		// EMFILE (this process) or ENFILE (the system): drill could not
		// open the socket; the target never saw the request.
		return measure.ErrGeneratorFiles
	case strings.Contains(m, noConnection):
		return measure.ErrDialTimeout
	case strings.Contains(m, "connection refused"):
		return measure.ErrRefused
	case strings.Contains(m, "dial tcp") || strings.Contains(m, "no route to host") ||
		strings.Contains(m, "network is unreachable") || strings.Contains(m, "no such host"):
		if strings.Contains(m, "timeout") {
			return measure.ErrDialTimeout
		}
		return measure.ErrUnreachable
	case strings.Contains(m, "timeout") || strings.Contains(m, "deadline exceeded"):
		return measure.ErrTimeout
	case strings.Contains(m, "connection reset") || strings.Contains(m, "broken pipe") ||
		strings.HasSuffix(m, "eof") || strings.Contains(m, "eof (") || strings.Contains(m, "server closed"):
		return measure.ErrReset
	}
	return measure.ErrOther
}

// retryPolicy is a stream's resolved client retry behaviour.
type retryPolicy struct {
	policy      scenario.RetryPolicy
	interval    time.Duration
	maxAttempts int
	on          map[int]bool
	// attemptHeader, when set, is the canonical name of the header that
	// carries each retry's number (scenario.Retry.AttemptHeader).
	attemptHeader string
}

// RetriesHeader is the header the transport adds to the response that
// ends an exchange that was retried: how many retries it took ("4" for
// the answer to the 4th retry). The service never sees it; response
// checks read it (scenario.Check.MinRetries). Absent: no retry.
const RetriesHeader = "X-Drill-Retries"

func newRetryPolicy(r *scenario.Retry) (retryPolicy, error) {
	p := retryPolicy{policy: scenario.RetryNone, maxAttempts: 1}
	if r == nil || r.Policy == "" || r.Policy == scenario.RetryNone {
		return p, nil
	}
	if r.Policy != scenario.RetryFixed && r.Policy != scenario.RetryAfter {
		return p, errors.New("retry: unknown policy " + strconv.Quote(string(r.Policy)) + "; use none, fixed or retry-after")
	}
	p.policy = r.Policy
	p.interval = r.Interval.D()
	if p.interval <= 0 {
		p.interval = 50 * time.Millisecond
	}
	p.maxAttempts = r.MaxAttempts
	if p.maxAttempts == 0 {
		p.maxAttempts = 3
	}
	if p.maxAttempts < 1 {
		return p, errors.New("retry: maxAttempts must be at least 1")
	}
	codes := r.On
	if len(codes) == 0 {
		codes = []int{429, 502, 503, 504}
	}
	p.on = map[int]bool{}
	for _, c := range codes {
		p.on[c] = true
	}
	if r.AttemptHeader != "" {
		p.attemptHeader = http.CanonicalHeaderKey(r.AttemptHeader)
	}
	return p, nil
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// transport wraps the stream's http.Transport: it applies the stream's
// timeout, renders body templates with the hit's exact sequence number
// and intended time, retries as the
// stream's policy says, counts in-flight requests, and counts bytes in and
// out (all of a response body, although vegeta keeps none of it) and
// retries into the bucket of the hit's intended time.
type transport struct {
	base    *http.Transport
	lean    *h1Transport // nil: base sends every request
	s       *stream
	routers map[string]Router
}

// leanFor reports whether the lean transport sends req (http:// URLs,
// when the stream has one).
func (t *transport) leanFor(req *http.Request) bool {
	return t.lean != nil && req.URL.Scheme == "http"
}

// send makes one attempt: through the router of the URL's host when there
// is one, else straight with the lean or the base transport.
func (t *transport) send(req *http.Request) (*http.Response, error) {
	var rt http.RoundTripper = t.base
	if t.leanFor(req) {
		rt = t.lean
	}
	if r := t.routers[req.URL.Host]; r != nil {
		return r.RoundTripVia(rt, req)
	}
	return rt.RoundTrip(req)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.s
	seq, seqOK := uint64(0), false
	if v := req.Header.Get("X-Vegeta-Seq"); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			seq, seqOK = n, true
		}
	}
	s.inflight.Add(1)
	// The stream's timeout, from here to the end of the response body
	// (what http.Client.Timeout covers). It is not http.Client.Timeout:
	// for a RoundTripper that is not an *http.Transport the client enforces
	// that with a goroutine, a timer and a cancel channel per request. The
	// lean transport sets it on the request's connection (and the dial),
	// reading it from the dialState, so its requests carry no context timer
	// (a context's timer starts a goroutine when it fires, which a fault
	// that holds every request makes thousands of times a second; a new
	// connection's dial still arms net.Dialer's own, which fires only on a
	// dial timeout); for net/http's Transport it is the context's deadline.
	deadline := time.Now().Add(s.timeout)
	ctx, cancel := req.Context(), context.CancelFunc(noCancel)
	if !t.leanFor(req) {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	rs := &reqState{s: s, seq: seq, seqOK: seqOK, cancel: cancel}
	rs.dial.deadline = deadline
	// The stream's dial function marks the connection attempts it makes
	// for this request (see dialState).
	ctx = context.WithValue(ctx, dialStateKey{}, &rs.dial)
	finish := rs.finish
	// A shallow copy: vegeta builds a fresh request (and header map) for
	// every hit and never reuses it, so the transport may edit the header.
	req = req.WithContext(ctx)

	if v := req.Header.Get(tplHeader); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 || i >= len(s.tpls) {
			finish(0, 0, 0)
			return nil, errors.New("load: bad body template marker " + strconv.Quote(v))
		}
		body, err := s.tpls[i].render(s, seq)
		if err != nil {
			finish(0, 0, 0)
			return nil, err
		}
		req.Header.Del(tplHeader)
		setBody(req, body)
	} else if s.retry.maxAttempts > 1 && req.GetBody == nil && req.Body != nil {
		// Keep the body for retries (vegeta's requests normally have GetBody).
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			finish(0, 0, 0)
			return nil, err
		}
		setBody(req, b)
	}

	var out, retries int64
	for attempt := 1; ; attempt++ {
		if req.ContentLength > 0 {
			out += req.ContentLength
		}
		resp, err := t.send(req)
		if err != nil && rs.dial.pending() && isTimeout(err) {
			// The timeout fired while the connection was still being
			// opened: a dial timeout, not a slow response.
			err = fmt.Errorf("%w; %s", err, noConnection)
		}
		if attempt >= s.retry.maxAttempts || !s.retry.wants(resp, err, deadline) {
			if err != nil {
				finish(0, out, retries)
				return nil, err
			}
			return rs.final(resp, out, retries), nil
		}
		wait := s.retry.interval
		if s.retry.policy == scenario.RetryAfter && resp != nil {
			if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				wait = d
			}
		}
		if time.Now().Add(wait).After(deadline) {
			// The retry could not happen before the client gives up: a client
			// honouring Retry-After returns this answer instead.
			if err != nil {
				finish(0, out, retries)
				return nil, err
			}
			return rs.final(resp, out, retries), nil
		}
		if resp != nil {
			// Drain a little so the connection can be reused; BytesIn counts
			// the final response only (one response per request).
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		retries++
		if !sleep.For(req.Context(), wait) {
			finish(0, out, retries)
			return nil, req.Context().Err()
		}
		if req.GetBody != nil {
			b, gerr := req.GetBody()
			if gerr != nil {
				finish(0, out, retries)
				return nil, gerr
			}
			r2 := req.Clone(req.Context())
			r2.Body = b
			req = r2
		}
		if h := s.retry.attemptHeader; h != "" {
			// This request's own header map (a fresh one per hit from
			// vegeta, or the clone's): the next attempt says its number.
			req.Header[h] = []string{strconv.FormatInt(retries, 10)}
		}
	}
}

// final hands resp to the caller as the exchange's answer: its body
// counts bytes and ends the request's accounting on Close, and a retried
// exchange's response says how many retries it took (RetriesHeader).
func (rs *reqState) final(resp *http.Response, out, retries int64) *http.Response {
	rs.out, rs.retries, rs.body = out, retries, resp.Body
	resp.Body = rs
	if retries > 0 {
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		resp.Header[RetriesHeader] = []string{strconv.FormatInt(retries, 10)}
	}
	return resp
}

// wants reports whether the outcome of an attempt calls for a retry:
// a status in the policy's list, or a transport error while the request
// still has time (before deadline).
func (p retryPolicy) wants(resp *http.Response, err error, deadline time.Time) bool {
	if p.maxAttempts <= 1 {
		return false
	}
	if err != nil {
		return time.Now().Before(deadline)
	}
	return p.on[resp.StatusCode]
}

func setBody(r *http.Request, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	if len(b) == 0 {
		r.Body = http.NoBody
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
}

// isTimeout reports whether err is a timeout (a context deadline or a
// network timeout).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// dialStateKey is the context key of a request's *dialState.
type dialStateKey struct{}

// dialState counts the connection attempts made for one request: begun
// (including those waiting for a dial slot), ended, and failed; and holds
// the request's deadline, which the dial honours (see requestDeadline).
// Safe for concurrent use (net/http's Transport dials in its own
// goroutine).
type dialState struct {
	begun, ended, failed atomic.Int32
	deadline             time.Time // set before the request is sent, then only read
}

// pending reports whether a connection attempt for the request has begun
// and not ended, or ended in failure (the dial's own timeout can fire at
// the same moment as the request's).
func (d *dialState) pending() bool {
	return d.begun.Load() > d.ended.Load() || d.failed.Load() > 0
}

// markDial records the start of a connection attempt on behalf of the
// request whose context is ctx, and returns the function that records its
// end with the dial's error; both do nothing for a context without a
// dialState.
func markDial(ctx context.Context) func(err error) {
	d, _ := ctx.Value(dialStateKey{}).(*dialState)
	if d == nil {
		return func(error) {}
	}
	d.begun.Add(1)
	return func(err error) {
		if err != nil {
			d.failed.Add(1)
		}
		d.ended.Add(1)
	}
}

// acquire takes a slot of sem (the stream's dial slots) for a dial,
// waiting until ctx ends or deadline (zero: none) passes. Errors: ctx's,
// or a dial timeout (a *net.OpError with os.ErrDeadlineExceeded, text
// "dial tcp: i/o timeout").
func acquire(ctx context.Context, sem chan struct{}, network string, deadline time.Time) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		// A channel timer: unlike a context's, it starts no goroutine.
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
	}
}

// noCancel is the cancel of a request without a context of its own.
func noCancel() {}

// reqState follows one request through the transport: it is the
// response body handed to vegeta (counting the bytes read) and reports
// in-flight end, bytes and retries exactly once (on Close, or on error).
type reqState struct {
	s                *stream
	seq              uint64
	seqOK            bool
	cancel           context.CancelFunc // ends the request's timeout context
	dial             dialState
	body             io.ReadCloser
	in, out, retries int64
	done             atomic.Bool
}

func (r *reqState) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	r.in += int64(n)
	return n, err
}

func (r *reqState) Close() error {
	err := r.body.Close()
	r.finish(r.in, r.out, r.retries)
	return err
}

func (r *reqState) finish(in, out, retries int64) {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	r.s.inflight.Add(-1)
	if r.seqOK {
		r.s.rec.addTransfer(r.s.intendedOffset(r.seq, time.Now()), in, out, retries)
	}
	r.cancel()
}
