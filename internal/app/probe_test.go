package app

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProbeCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/slow":
			time.Sleep(2 * time.Second)
		default:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"2xx", []string{"probe", srv.URL + "/ok"}, 0, "ok " + srv.URL + "/ok", ""},
		{"503", []string{"probe", srv.URL + "/startupz"}, 1, "", "HTTP 503"},
		{"timeout", []string{"probe", "--timeout", "200ms", srv.URL + "/slow"}, 1, "", "deadline exceeded"},
		{"refused", []string{"probe", "http://127.0.0.1:1/"}, 1, "", "connection refused"},
		{"no URL", []string{"probe"}, 2, "", "accepts 1 arg"},
		{"bad timeout", []string{"probe", "--timeout", "0s", srv.URL}, 2, "", "--timeout must be above 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Execute(context.Background(), &stdout, &stderr, tc.args, func(string) string { return "" })
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
				t.Fatalf("code %d stdout %q stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tc.code, tc.out, tc.err)
			}
		})
	}
}
