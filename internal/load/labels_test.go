package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/goroutines"
)

// TestPprofLabels: run under the generator label, the engine's workers
// keep it while they wait for a response, and the goroutines that record
// results and pack closed seconds carry the measurement label, so a CPU
// profile splits the two.
func TestPprofLabels(t *testing.T) {
	held := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	}))
	defer srv.Close()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	clock := event.NewClock()
	e, err := New(clock, []scenario.Stream{{
		Name: "l", Targets: []scenario.Target{{URL: srv.URL}}, Rate: rate(20, time.Second),
		Duration: dur(time.Minute), LagBudget: relaxed,
	}}, Options{}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go cpuuse.Do(ctx, cpuuse.PartGenerator, func(ctx context.Context) { done <- e.Run(ctx) })
	// A request is held by the server: its worker waits in RoundTrip.
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no request reached the server in 30 s")
	}
	for _, c := range []struct {
		fn, want string
	}{
		{"load.(*transport).RoundTrip+", cpuuse.PartGenerator},
		{"load.(*Engine).runStream+", cpuuse.PartMeasurement},
		{"load.(*Engine).Run+", cpuuse.PartMeasurement},
	} {
		got, err := goroutines.Labels(c.fn, cpuuse.LabelKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || slices.ContainsFunc(got, func(v string) bool { return v != c.want }) {
			t.Errorf("goroutines in %s carry %s=%q, want all %q", c.fn, cpuuse.LabelKey, got, c.want)
		}
	}
	cancel()
	free()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
