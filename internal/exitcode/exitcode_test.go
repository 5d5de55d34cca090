package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestCode(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"plain error", base, CouldNotRun},
		{"wrapped", Wrap(BadInput, base), BadInput},
		{"wrapped twice, outer wins", Wrap(AssertionFailed, Wrap(CleanupUnverified, base)), AssertionFailed},
		{"inside fmt.Errorf", fmt.Errorf("run drill: %w", Wrap(InvalidMeasurement, base)), InvalidMeasurement},
		{"joined", errors.Join(base, Wrap(BadInput, base)), BadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Code(tt.err); got != tt.want {
				t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
	if Wrap(BadInput, nil) != nil {
		t.Error("Wrap(BadInput, nil) != nil")
	}
	if got := Wrap(BadInput, base).Error(); got != "boom" {
		t.Errorf("message = %q, want boom", got)
	}
	if !errors.Is(Wrap(BadInput, base), base) {
		t.Error("Wrap hides the wrapped error from errors.Is")
	}
}
