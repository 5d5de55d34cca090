package workers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestMeasureClock: against a real HTTPS server on loopback whose Date
// header runs shift ahead of this machine's clock, the measured offset is
// -shift within its stated uncertainty (plus 2 ms for the scheduling of a
// shared machine), and the uncertainty is below 20 ms.
func TestMeasureClock(t *testing.T) {
	for _, shift := range []time.Duration{0, 300 * time.Millisecond, -1700 * time.Millisecond} {
		t.Run(shift.String(), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Date", time.Now().Add(shift).UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusUnauthorized) // any answer has a Date
			}))
			defer srv.Close()
			r, err := MeasureClock(context.Background(), srv.Client(), srv.URL, 0)
			if err != nil {
				t.Fatalf("MeasureClock: %v", err)
			}
			t.Logf("shift %s: reading %s", shift, &r)
			if d := (r.Offset + shift).Abs(); d > r.Uncertainty+2*time.Millisecond {
				t.Errorf("offset %s, want %s within ±%s", r.Offset, -shift, r.Uncertainty)
			}
			if r.Uncertainty <= 0 || r.Uncertainty > 20*time.Millisecond {
				t.Errorf("uncertainty %s, want within (0, 20ms]", r.Uncertainty)
			}
			if want := shift.Abs() > DefaultMaxClockOffset+r.Uncertainty; r.Beyond(DefaultMaxClockOffset) != want {
				t.Errorf("Beyond(%s) = %t, want %t", DefaultMaxClockOffset, !want, want)
			}
		})
	}
}

// TestMeasureClockNoDate: a server without a usable Date header gives an
// error, and the reading says the clock was not measured.
func TestMeasureClockNoDate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = []string{"yesterday"}
	}))
	defer srv.Close()
	r, err := MeasureClock(context.Background(), srv.Client(), srv.URL, time.Second)
	if err == nil || !strings.Contains(err.Error(), "Date") {
		t.Fatalf("err = %v, want one about the Date header", err)
	}
	r.Error = err.Error()
	if !strings.HasPrefix(r.String(), "not measured") || r.Beyond(0) {
		t.Errorf("reading %q (beyond %t), want not measured", r.String(), r.Beyond(0))
	}
}
