package paymentcore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// TaxAPI is the client of the third-party tax API (reached through
// Toxiproxy in a drill). It POSTs {"jurisdiction": J, "amountCents": N} to
// the configured URL as is and expects 2xx with a JSON object holding
// "rate", a fraction in (0, 1) (e.g. {"rate": 0.0725}). Safe for concurrent
// use.
type TaxAPI struct {
	url     string
	timeout time.Duration
	hc      *http.Client
}

// ErrTaxInvalidResponse marks a 2xx answer without a usable rate.
var ErrTaxInvalidResponse = errors.New("tax api answered without a valid rate")

// NewTaxAPI returns a client for url whose calls give up after timeout (the
// socket timeout of MC-ST-01, 10 s). maxConns sizes the keep-alive pool.
func NewTaxAPI(url string, timeout time.Duration, maxConns int) *TaxAPI {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
	}
	return &TaxAPI{url: url, timeout: timeout, hc: &http.Client{Transport: tr}}
}

// Rate asks the tax API for jurisdiction's rate within the timeout (and
// ctx). Errors: the transport's (wrapping context.DeadlineExceeded on
// timeout), a non-2xx status, or [ErrTaxInvalidResponse].
func (c *TaxAPI) Rate(ctx context.Context, jurisdiction string, amountCents int64) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body, err := json.Marshal(map[string]any{"jurisdiction": jurisdiction, "amountCents": amountCents})
	if err != nil {
		return 0, fmt.Errorf("encode tax request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build tax request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("call tax api: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, fmt.Errorf("read tax api answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, fmt.Errorf("call tax api: status %d", resp.StatusCode)
	}
	var out struct {
		Rate *float64 `json:"rate"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrTaxInvalidResponse, err)
	}
	if out.Rate == nil || !(*out.Rate > 0 && *out.Rate < 1) {
		return 0, ErrTaxInvalidResponse
	}
	return *out.Rate, nil
}

// Close drops idle connections.
func (c *TaxAPI) Close() { c.hc.CloseIdleConnections() }
