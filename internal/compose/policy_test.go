package compose

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/composefile"

	"github.com/moby/moby/api/types/container"
)

func TestRestartPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    container.RestartPolicy
		wantErr error
	}{
		{"", container.RestartPolicy{Name: container.RestartPolicyDisabled}, nil},
		{"no", container.RestartPolicy{Name: container.RestartPolicyDisabled}, nil},
		{"always", container.RestartPolicy{Name: container.RestartPolicyAlways}, nil},
		{"unless-stopped", container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}, nil},
		{"on-failure", container.RestartPolicy{Name: container.RestartPolicyOnFailure}, nil},
		{"on-failure:3", container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: 3}, nil},
		{"sometimes", container.RestartPolicy{}, composefile.ErrUnsupported},
	}
	for _, tt := range tests {
		got, err := restartPolicy(tt.in)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%q: err %v, want %v", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	n, c := Names("20261202.064933.CB7C13", "shop", "api")
	if n != "drill-20261202.064933.cb7c13-shop" || c != "drill-20261202.064933.cb7c13-api" {
		t.Errorf("Names = %q, %q", n, c)
	}
}

func TestStartIntervalIgnored(t *testing.T) {
	h := &composefile.Health{Test: []string{"CMD", "/drill", "probe", "http://localhost:8080/startupz"},
		Interval: 30 * time.Second, StartPeriod: 10 * time.Second, StartInterval: 2 * time.Second}
	tests := []struct {
		name, api string
		h         *composefile.Health
		want      string // substring; "" means no warning
	}{
		{"old engine", "1.41", h, "services.api.healthcheck.start_interval: 2s is ignored by this engine (API 1.41): start_interval needs API 1.44, so during start_period (10s) the engine checks every interval (30s) instead"},
		{"engine that carries it out", "1.44", h, ""},
		{"newer engine", "1.51", h, ""},
		{"two-digit minor below", "1.9", h, "API 1.9"},
		{"unknown version", "", h, "an engine of unknown API version"},
		{"no start_interval", "1.41", &composefile.Health{Interval: time.Second}, ""},
		{"disabled", "1.41", &composefile.Health{Disable: true, StartInterval: time.Second}, ""},
		{"no healthcheck", "1.41", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := startIntervalIgnored(tt.api, "api", tt.h)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("startIntervalIgnored(%q) = %q, want %q", tt.api, got, tt.want)
			}
		})
	}
}
