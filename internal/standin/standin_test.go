package standin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
)

func TestToxiproxyStandIn(t *testing.T) {
	ctx := context.Background()
	p, tp, err := StartToxiproxy(ctx, Config{Name: "toxiproxy"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	if p.PID() == os.Getpid() || !proctree.Alive(p.PID()) {
		t.Fatalf("stand-in pid %d: want a live process of its own", p.PID())
	}
	// An upstream on loopback; a proxy to it in the stand-in; bytes
	// through it show on the live meters.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })}
	go srv.Serve(up)
	defer srv.Close()
	info, err := tp.CreateProxy(ctx, "api", "127.0.0.1:0", up.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + info.Listen + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("through the proxy: %q", body)
	}
	c, err := tp.Counters(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Live || c.Upstream == 0 || c.Downstream == 0 {
		t.Fatalf("counters %+v: want live, bytes both ways", c)
	}
	if _, err := tp.Counters(ctx, "nope"); !errors.Is(err, inject.ErrProxyNotFound) {
		t.Fatalf("counters of a missing proxy: %v, want ErrProxyNotFound", err)
	}
	pid := p.PID()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if proctree.Alive(pid) {
		t.Fatalf("stand-in %d still alive after Stop", pid)
	}
	if _, err := net.DialTimeout("tcp", info.Listen, time.Second); err == nil {
		t.Fatalf("proxy %s still listening after Stop", info.Listen)
	}
	if err := p.Send(struct{}{}); !errors.Is(err, ErrExited) {
		t.Fatalf("send after stop: %v, want ErrExited", err)
	}
}

func TestStubsStandIn(t *testing.T) {
	ctx := context.Background()
	p, addrs, err := StartStubs(ctx, Config{}, []StubSpec{
		{Name: "tax", Spec: scenario.HTTPStubDep{Status: 201, Body: `{"rate":0.2}`, Latency: scenario.Duration{Duration: 20 * time.Millisecond}}},
		{Name: "fraud", Spec: scenario.HTTPStubDep{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	start := time.Now()
	res, err := http.Get("http://" + addrs["tax"] + "/v1/tax")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 || string(body) != `{"rate":0.2}` || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("tax stub: %d %q after %s; want 201, the body, after 20ms or more", res.StatusCode, body, time.Since(start))
	}
	res, err = http.Get("http://" + addrs["fraud"] + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("fraud stub: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

func TestStartFailures(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown role", Config{Role: "balancer"}, `unknown stand-in role "balancer"`},
		{"bad setup", Config{Role: RoleStubs, Setup: map[string]int{"x": 1}}, "decode stubs setup"},
		{"bad stub", Config{Role: RoleStubs, Setup: []StubSpec{{Name: "tax", Spec: scenario.HTTPStubDep{Status: 7}}}}, "start http stub tax: start http stub: status 7 is not an HTTP status"},
		{"no binary", Config{Role: RoleStubs, Executable: "/nonexistent/drill"}, "no such file"},
		{"not drill", Config{Role: RoleStubs, Executable: "/bin/true"}, "exited before it was ready"},
		{"no role", Config{}, "no role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(ctx, tt.cfg)
			if err == nil {
				_ = p.Stop(ctx)
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestReadyTimeoutKillsTheChild(t *testing.T) {
	// A child that never writes its ready line.
	script := t.TempDir() + "/silent"
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{Role: RoleStubs, Executable: script, ReadyTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no ready line within 300ms") {
		t.Fatalf("err %v", err)
	}
}

// TestStandInEndsWithItsParent kills a parent process (this test binary
// run again as helperParent) with SIGKILL and checks its stand-in
// ends by itself: the kernel closes the stand-in's stdin.
func TestStandInEndsWithItsParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "STANDIN_TEST_PARENT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Fscanf(out, "child %d\n", &child); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("read the child's pid: %v", err)
	}
	if !proctree.Alive(child) {
		t.Fatalf("stand-in %d not alive while its parent runs", child)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for proctree.Alive(child) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("stand-in %d outlived its SIGKILLed parent by 20 s", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// helperParent is the parent of TestStandInEndsWithItsParent: this test
// binary run again with STANDIN_TEST_PARENT=1, which TestMain sends here
// instead of to the tests. It starts a stand-in, prints its pid and waits
// to be killed.
func helperParent() {
	p, _, err := StartToxiproxy(context.Background(), Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("child " + strconv.Itoa(p.PID()))
	time.Sleep(time.Minute) // killed long before
	os.Exit(1)
}

// TestMain runs the tests, or, in a child of TestStandInEndsWithItsParent,
// the helper parent (so no test is reported skipped for it). Stand-in
// children of the tests are dispatched earlier, by the package's init.
func TestMain(m *testing.M) {
	if os.Getenv("STANDIN_TEST_PARENT") == "1" {
		helperParent()
	}
	os.Exit(m.Run())
}

// TestServiceStandIn: the listener in its own process follows endpoint
// commands in order: 503 with no ready endpoint, the replica's answer
// once it is set ready, 503 again once it is removed.
func TestServiceStandIn(t *testing.T) {
	ctx := context.Background()
	replica := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from replica") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go replica.Serve(ln)
	defer replica.Close()
	p, l, err := StartService(ctx, Config{}, "orders", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	get := func() (int, string) {
		t.Helper()
		res, err := http.Get("http://" + l.Addr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// Commands are applied asynchronously: wait (bounded) for each to land.
	await := func(want int) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body := get()
			if code == want {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("status %d (%q), want %d", code, body, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if body := await(http.StatusServiceUnavailable); !strings.Contains(body, "no ready endpoints for service orders") {
		t.Fatalf("no endpoints: %q", body)
	}
	l.SetEndpoint("orders-0", ln.Addr().String(), 0, false)
	l.SetEndpoint("orders-0", ln.Addr().String(), 0, true)
	if body := await(http.StatusOK); body != "from replica" {
		t.Fatalf("ready endpoint: %q", body)
	}
	l.RemoveEndpoint("orders-0")
	await(http.StatusServiceUnavailable)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Every change was acknowledged, stamped on the machine's monotonic
	// clock in the child: the lag is positive and bounded.
	if n, slowest := l.Followed(); n != 3 || slowest <= 0 || slowest > 10*time.Second {
		t.Fatalf("followed %d changes, slowest %s; want 3, above 0 and under 10 s", n, slowest)
	}
	l.SetEndpoint("orders-0", ln.Addr().String(), 0, true) // after Close: dropped quietly
}

// TestEarly: a stand-in killed behind drill's back reports it (with how
// it ended); one drill stopped does not.
func TestEarly(t *testing.T) {
	ctx := context.Background()
	stubs := []StubSpec{{Name: "a", Spec: scenario.HTTPStubDep{}}}
	stopped, _, err := StartStubs(ctx, Config{Name: "stopped"}, stubs)
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if at, err := stopped.Early(); err != nil || !at.IsZero() {
		t.Errorf("stopped stand-in: Early() = %v, %v; want zero, nil", at, err)
	}
	killed, _, err := StartStubs(ctx, Config{Name: "killed"}, stubs)
	if err != nil {
		t.Fatal(err)
	}
	defer killed.Stop(ctx)
	if _, err := killed.Early(); err != nil {
		t.Errorf("running stand-in: Early() = %v, want nil", err)
	}
	if err := syscall.Kill(killed.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		at, err := killed.Early()
		if err != nil {
			if at.IsZero() || !strings.Contains(err.Error(), "stand-in killed") || !strings.Contains(err.Error(), "signal: killed") {
				t.Errorf("Early() = %v, %v; want its time and an error naming it and the signal", at, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Early() still nil 30 s after SIGKILL")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
