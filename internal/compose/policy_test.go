package compose

import (
	"errors"
	"github.com/drillhq/drill/internal/composefile"
	"testing"

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
