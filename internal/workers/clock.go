package workers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// Clock check of the workers: they share t=0 through their nodes' wall
// clocks, so each measures its clock against the API server's (the one
// clock every pod of the cluster reaches) before t=0.
const (
	// DefaultMaxClockOffset: a worker whose clock is measured further than
	// this from the API server's, beyond the measurement's uncertainty,
	// makes the run invalid: its requests would go out that much off the
	// schedule the other workers keep. The same order as the start bound
	// (DefaultMaxStartLate).
	DefaultMaxClockOffset = 10 * time.Millisecond
	// EnvAPIHost and EnvAPIPort locate the API server inside a pod; the
	// kubelet (and drill agent) set them.
	EnvAPIHost = "KUBERNETES_SERVICE_HOST"
	EnvAPIPort = "KUBERNETES_SERVICE_PORT"
	// ServiceAccountCA is the cluster CA mounted in a pod that has a
	// service account token; without it the check does not verify the
	// API server's certificate (it reads nothing but the Date header).
	ServiceAccountCA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	// clockBudget bounds one measurement (a little over two Date ticks).
	clockBudget = 3 * time.Second
	// coarsePoll spaces the probes that find the first Date tick.
	coarsePoll = 20 * time.Millisecond
	// fineLead is how long before the predicted second tick the
	// back-to-back probes start.
	fineLead = 30 * time.Millisecond
)

// ClockReading is a worker's clock measured against the API server's.
type ClockReading struct {
	// Offset is the worker's wall clock minus the API server's (ns):
	// positive when the worker's clock is ahead.
	Offset time.Duration `json:"offset"`
	// Uncertainty is half the width of the interval the true offset lies
	// in (ns): about one request's round trip.
	Uncertainty time.Duration `json:"uncertainty"`
	// Against is the URL whose Date header was read.
	Against string `json:"against,omitempty"`
	// Error says why the clock was not measured ("" when it was).
	Error string `json:"error,omitempty"`
}

// Beyond reports whether the reading shows the clock off by more than
// bound even at the near end of its uncertainty.
func (c *ClockReading) Beyond(bound time.Duration) bool {
	if c == nil || c.Error != "" {
		return false
	}
	return c.Offset.Abs()-c.Uncertainty > bound
}

// String is "+1.2ms ±0.4ms", or "not measured (why)".
func (c *ClockReading) String() string {
	if c == nil {
		return "not measured"
	}
	if c.Error != "" {
		return "not measured (" + c.Error + ")"
	}
	sign := "+"
	if c.Offset < 0 {
		sign = "-"
	}
	return fmt.Sprintf("%s%s ±%s", sign, c.Offset.Abs().Round(10*time.Microsecond), c.Uncertainty.Round(10*time.Microsecond))
}

// APIServerURL returns the API server's URL from getenv's EnvAPIHost and
// EnvAPIPort ("" when either is unset).
func APIServerURL(getenv func(string) string) string {
	host, port := getenv(EnvAPIHost), getenv(EnvAPIPort)
	if host == "" || port == "" {
		return ""
	}
	return "https://" + net.JoinHostPort(host, port) + "/livez"
}

// APIServerClient is the HTTP client of the clock check: it trusts
// ServiceAccountCA when the pod has it, else it does not verify the
// server (only the Date header is read).
func APIServerClient() *http.Client {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if pem, err := os.ReadFile(ServiceAccountCA); err == nil {
		pool := x509.NewCertPool()
		if pool.AppendCertsFromPEM(pem) {
			tc.RootCAs = pool
		}
	}
	if tc.RootCAs == nil {
		tc.InsecureSkipVerify = true //nolint:gosec // only the Date header is read
	}
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 1}}
}

// MeasureClock measures the local wall clock against the Date header of
// url's answers (any status). A Date header has a resolution of one
// second, so it finds the moment the server's second ticks over: probes
// every coarsePoll until the Date changes, then back-to-back probes around
// the next predicted tick; the tick lies between the send time of the last
// probe that saw the old second and the receive time of the first that
// saw the new one. It takes up to budget (default a little over two
// seconds' ticks when budget <= 0) and returns an error when the server
// does not answer with a Date or no tick was seen in time.
func MeasureClock(ctx context.Context, client *http.Client, url string, budget time.Duration) (ClockReading, error) {
	if budget <= 0 {
		budget = clockBudget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type probe struct {
		send, recv time.Time
		date       time.Time
	}
	get := func() (probe, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return probe{}, err
		}
		p := probe{send: time.Now()}
		resp, err := client.Do(req)
		if err != nil {
			return probe{}, err
		}
		p.recv = time.Now()
		resp.Body.Close()
		if p.date, err = http.ParseTime(resp.Header.Get("Date")); err != nil {
			return probe{}, fmt.Errorf("answer without a usable Date header: %w", err)
		}
		return p, nil
	}
	// tick waits for the Date to change, probing every poll after first
	// sleeping until at; it returns the probes on both sides of the tick.
	tick := func(at time.Time, poll time.Duration) (before, after probe, err error) {
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return before, after, ctx.Err()
			case <-time.After(d):
			}
		}
		if before, err = get(); err != nil {
			return before, after, err
		}
		for {
			if poll > 0 {
				select {
				case <-ctx.Done():
					return before, after, ctx.Err()
				case <-time.After(poll):
				}
			}
			p, err := get()
			if err != nil {
				return before, after, err
			}
			if !p.date.Equal(before.date) {
				return before, p, nil
			}
			before = p
		}
	}
	// Coarse: the first tick, to within coarsePoll plus a round trip.
	b, a, err := tick(time.Time{}, coarsePoll)
	if err != nil {
		return ClockReading{Against: url}, fmt.Errorf("measure the clock against %s: %w", url, err)
	}
	// Fine: the next tick, predicted one second after the first.
	predicted := b.send.Add(a.recv.Sub(b.send) / 2).Add(time.Second)
	b, a, err = tick(predicted.Add(-fineLead), 0)
	if err != nil {
		return ClockReading{Against: url}, fmt.Errorf("measure the clock against %s: %w", url, err)
	}
	if !a.date.After(b.date) {
		return ClockReading{Against: url}, errors.New("measure the clock: the server's Date went back")
	}
	half := a.recv.Sub(b.send) / 2
	local := b.send.Add(half) // local time of the server's tick to a.date
	return ClockReading{Offset: local.Sub(a.date), Uncertainty: half, Against: url}, nil
}
