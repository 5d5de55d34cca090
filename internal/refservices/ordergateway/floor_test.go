package ordergateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWriteFloor(t *testing.T) {
	tests := []struct {
		name     string
		limit    time.Duration
		observed []time.Duration
		want     time.Duration
	}{
		{"nothing written yet: no floor", 100 * time.Millisecond, nil, 0},
		{"twice the first INSERT", 100 * time.Millisecond, []time.Duration{20 * time.Millisecond}, 40 * time.Millisecond},
		{"smoothed with weight 1/8", time.Second, []time.Duration{40 * time.Millisecond, 120 * time.Millisecond}, 2 * 50 * time.Millisecond},
		{"capped at the limit", 100 * time.Millisecond, []time.Duration{900 * time.Millisecond}, 100 * time.Millisecond},
		{"no deadline of its own (naive): limit 0", 0, []time.Duration{20 * time.Millisecond}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &writeFloor{limit: tt.limit}
			for _, d := range tt.observed {
				f.observe(d)
			}
			if got := f.floor(); got != tt.want {
				t.Errorf("floor() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteFloorTooLate(t *testing.T) {
	f := &writeFloor{limit: 100 * time.Millisecond}
	f.observe(30 * time.Millisecond) // floor 60 ms
	near, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	far, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"10 ms left, floor 60 ms", near, true},
		{"an hour left", far, false},
		{"no deadline", context.Background(), false},
	} {
		if got := f.tooLate(c.ctx); got != c.want {
			t.Errorf("%s: tooLate = %t, want %t", c.name, got, c.want)
		}
	}
	if !errors.Is(errTooLate, context.DeadlineExceeded) {
		t.Error("errTooLate does not wrap context.DeadlineExceeded: the handler would not answer it as a timeout")
	}
}
