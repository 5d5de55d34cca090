package localenv

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

func TestThresholds(t *testing.T) {
	tests := []struct {
		name             string
		success, failure int
		results          string // s = success, f = failure
		want             string // e = takes effect, . = not
	}{
		{"defaults", 1, 3, "sffffs", "e..eee"},
		{"streak of 2 does nothing", 1, 3, "sffsff", "e..e.."},
		{"success threshold 2", 2, 3, "sfsss", "...ee"},
		{"failure threshold 1", 1, 1, "fsf", "eee"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			th := thresholds{success: tc.success, failure: tc.failure}
			var got strings.Builder
			for _, r := range tc.results {
				if th.observe(r == 's') {
					got.WriteByte('e')
				} else {
					got.WriteByte('.')
				}
			}
			if got.String() != tc.want {
				t.Errorf("results %s: got %s, want %s", tc.results, got.String(), tc.want)
			}
		})
	}
}

func TestThresholdsHold(t *testing.T) {
	th := thresholds{success: 1, failure: 3}
	for range 3 {
		th.observe(false)
	}
	th.hold()
	// After a kill the next container's failures count from zero again.
	first, second, third := th.observe(false), th.observe(false), th.observe(false)
	if first || second || !third {
		t.Error("after hold, want three new failures to take effect")
	}
}

func TestBackoffSequence(t *testing.T) {
	b := backoff{base: 10 * time.Second, max: 5 * time.Minute, expire: 10 * time.Minute}
	t0 := time.Unix(1_000_000, 0)
	now := t0
	var waits []time.Duration
	// A crash loop: each instance exits right after it starts.
	for range 8 {
		w := b.wait(now, now)
		waits = append(waits, w)
		now = now.Add(w)
		b.next(now, now.Add(-w))
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}
	if !reflect.DeepEqual(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	// After running 11 minutes the back-off starts again.
	now = now.Add(11 * time.Minute)
	if w := b.wait(now, now); w != 0 {
		t.Errorf("after 11 min of running: wait %s, want 0", w)
	}
	b.next(now, now)
	if w := b.wait(now, now); w != 10*time.Second {
		t.Errorf("after reset: next wait %s, want 10s", w)
	}
	// No exited container to compare with (first liveness kill): no wait,
	// no advance.
	fresh := backoff{base: time.Second, max: time.Minute, expire: 2 * time.Minute}
	fresh.next(now, time.Time{})
	if fresh.wait(now, time.Time{}) != 0 || fresh.current() != 0 {
		t.Error("a restart with no previous exit must not wait or advance the back-off")
	}
}

func TestLogSink(t *testing.T) {
	var file strings.Builder
	l := newLogSink(&file, nil, 3)
	seq := l.mark("start 0")
	fmt.Fprint(l, "a\nb\r\nc")
	fmt.Fprint(l, "d\ne\n")
	if got, want := l.since(seq), []string{"b", "cd", "e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("since(%d) = %q, want %q", seq, got, want)
	}
	fmt.Fprint(l, "partial")
	seq2 := l.mark("start 1")
	if got, want := l.since(seq2), []string(nil); len(got) != 0 {
		t.Errorf("since(%d) = %q, want %q", seq2, got, want)
	}
	if got, want := l.since(0), []string{"e", "partial", "start 1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("since(0) = %q, want %q", got, want)
	}
	if want := "start 0\na\nb\r\ncd\ne\npartial\nstart 1\n"; file.String() != want {
		t.Errorf("file %q, want %q", file.String(), want)
	}
}

func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Probe") != "yes" || !strings.HasPrefix(r.UserAgent(), "kube-probe/") {
			w.WriteHeader(400)
			return
		}
		switch r.URL.Path {
		case "/slow":
			time.Sleep(1500 * time.Millisecond)
		case "/code":
			code, _ := strconv.Atoi(r.URL.Query().Get("c"))
			w.WriteHeader(code)
			fmt.Fprint(w, "  body\nline ")
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	p := newProber()
	tests := []struct {
		path   string
		ok     bool
		detail string
	}{
		{"/code?c=200", true, "HTTP 200"},
		{"/code?c=302", true, "HTTP 302"},
		{"/code?c=399", true, "HTTP 399"},
		{"/code?c=404", false, "HTTP probe failed with statuscode: 404: body line"},
		{"/code?c=503", false, "HTTP probe failed with statuscode: 503: body line"},
		{"/slow", false, "context deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			spec, err := newProbeSpec(event.ProbeReadiness, &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{
				Path: tc.path, HTTPHeaders: []scenario.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}})
			if err != nil {
				t.Fatal(err)
			}
			ok, detail := p.run(context.Background(), spec, probeTarget{port: port})
			if ok != tc.ok || !strings.Contains(detail, tc.detail) {
				t.Errorf("got %t %q, want %t %q", ok, detail, tc.ok, tc.detail)
			}
		})
	}
}

func TestProbeDefaults(t *testing.T) {
	s, err := newProbeSpec(event.ProbeLiveness, &scenario.Probe{TCPSocket: &scenario.TCPSocketAction{}})
	if err != nil {
		t.Fatal(err)
	}
	if s.period != 10*time.Second || s.timeout != time.Second || s.success != 1 || s.failure != 3 || s.initialDelay != 0 || s.grace != nil {
		t.Errorf("defaults: %+v", s)
	}
	g := int64(5)
	s, err = newProbeSpec(event.ProbeStartup, &scenario.Probe{Exec: &scenario.ExecAction{Command: []string{"true"}},
		InitialDelaySeconds: 2, PeriodSeconds: 3, TimeoutSeconds: 4, FailureThreshold: 30, TerminationGracePeriodSeconds: &g})
	if err != nil {
		t.Fatal(err)
	}
	if s.initialDelay != 2*time.Second || s.period != 3*time.Second || s.timeout != 4*time.Second || s.failure != 30 || *s.grace != 5*time.Second {
		t.Errorf("explicit: %+v", s)
	}
	if _, err := newProbeSpec(event.ProbeReadiness, &scenario.Probe{TCPSocket: &scenario.TCPSocketAction{}, TerminationGracePeriodSeconds: &g}); err == nil {
		t.Error("readiness probe with terminationGracePeriodSeconds accepted")
	}
}

// TestBackoffResetBoundary: the back-off resets only when the container
// finished more than 2 x max (10 min) after its last restart, as
// flowcontrol.Backoff's hasExpired does; at exactly 10 min it keeps its
// delay.
func TestBackoffResetBoundary(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		ran  time.Duration
		wait time.Duration
	}{
		{9 * time.Minute, 20 * time.Second},
		{10 * time.Minute, 20 * time.Second},
		{10*time.Minute + time.Second, 0},
	} {
		b := backoff{base: 10 * time.Second, max: 5 * time.Minute, expire: 10 * time.Minute}
		b.next(t0, t0)                     // first restart: 10 s
		b.next(t0.Add(10*time.Second), t0) // second: 20 s, last restart at t0+10s
		exit := t0.Add(10 * time.Second).Add(tc.ran)
		if w := b.wait(exit, exit); w != tc.wait {
			t.Errorf("ran %s after the last restart: wait %s, want %s", tc.ran, w, tc.wait)
		}
	}
}
