package compose

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultProbeTimeout bounds one `drill probe` request when no timeout is
// given (Docker's own healthcheck timeout kills the command anyway).
const DefaultProbeTimeout = 5 * time.Second

// Probe GETs url once within timeout (the whole exchange, body included)
// and returns nil for a 2xx answer; otherwise an error naming the status
// or the failure. It is what `drill probe URL` runs as the HEALTHCHECK of
// images FROM scratch, which have no curl.
func Probe(ctx context.Context, url string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe %s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	return nil
}
