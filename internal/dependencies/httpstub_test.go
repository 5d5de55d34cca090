package dependencies

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/scenario"
)

func TestHTTPStubAnswers(t *testing.T) {
	tests := []struct {
		name      string
		spec      scenario.HTTPStubDep
		wantCode  int
		wantBody  string
		wantCType string
	}{
		{"defaults", scenario.HTTPStubDep{}, 200, "{}", "application/json"},
		{"custom", scenario.HTTPStubDep{Status: 503, Body: "busy", ContentType: "text/plain"}, 503, "busy", "text/plain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := StartHTTPStub(context.Background(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			resp, err := http.Post(s.URL+"/v1/tax", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || string(body) != tc.wantBody || resp.Header.Get("Content-Type") != tc.wantCType {
				t.Fatalf("got %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
			}
			if s.Requests() != 1 {
				t.Fatalf("Requests() = %d, want 1", s.Requests())
			}
		})
	}
}

func TestHTTPStubLatencyAndCancel(t *testing.T) {
	s, err := StartHTTPStub(context.Background(), scenario.HTTPStubDep{Latency: scenario.Duration{Duration: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	resp, err := http.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("answered after %v, want >= 100ms", el)
	}

	// A cancelled request frees the handler long before the latency ends.
	s.SetLatency(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error = %v, want context.Canceled", err)
	}
	for s.InFlight() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.InFlight() != 0 {
		t.Fatal("handler still waiting after the client went away")
	}
}

func TestHTTPStubCloseEndsWaitingRequests(t *testing.T) {
	s, err := StartHTTPStub(context.Background(), scenario.HTTPStubDep{Latency: scenario.Duration{Duration: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(s.URL)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for s.InFlight() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("request succeeded after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request still hanging 10s after Close")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestHTTPStubBadStatus(t *testing.T) {
	if _, err := StartHTTPStub(context.Background(), scenario.HTTPStubDep{Status: 42}); err == nil {
		t.Fatal("status 42 accepted")
	}
}
