package localenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/netport"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// getEnv asks pod's test server for the value of environment variable name.
func (h *harness) getEnv(pod, name string) string {
	h.t.Helper()
	for _, st := range h.svc.Status() {
		if st.Pod == pod {
			code, body := getBody(h.t, "http://"+st.Address()+"/env?name="+name)
			if code != 200 {
				h.t.Fatalf("GET /env of %s: %d", pod, code)
			}
			return body
		}
	}
	h.t.Fatalf("no pod %s", pod)
	return ""
}

// TestReplicaIndex: each replica gets its 0-based index in REPLICA_INDEX,
// and keeps it across restarts, like a StatefulSet ordinal.
func TestReplicaIndex(t *testing.T) {
	t.Parallel()
	h := startService(t, ServiceSpec{Name: "idx", Replicas: 3,
		Env:    map[string]string{scenario.ReplicaIndexEnv: "99"}, // drill's value wins
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 0, 0)}})
	h.waitReady(3)
	for i := range 3 {
		if got := h.getEnv(fmt.Sprintf("idx-%d", i), "REPLICA_INDEX"); got != strconv.Itoa(i) {
			t.Errorf("idx-%d: REPLICA_INDEX=%q, want %d", i, got, i)
		}
	}
	h.control("idx-1", "exit=3")
	h.waitEvents("restart", 1, isKind(event.ContainerRestart, "idx-1"))
	h.waitReady(3)
	if got := h.getEnv("idx-1", "REPLICA_INDEX"); got != "1" {
		t.Errorf("idx-1 after a restart: REPLICA_INDEX=%q, want 1", got)
	}
}

// TestPortHandoff: the port goes in the variable and form the service
// asks for; the program that reads it there becomes ready.
func TestPortHandoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, format, want string
	}{
		{"LISTEN_ADDR", scenario.PortFormatHostPort, "127.0.0.1:%d"},
		{"SERVER_PORT", scenario.PortFormatColonPort, ":%d"},
		{"HTTP_PORT", "", "%d"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			h := startService(t, ServiceSpec{Name: "handoff", Replicas: 1, PortEnv: tc.env, PortFormat: tc.format,
				Env:    map[string]string{"LISTEN_ENV": tc.env},
				Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 0, 0)}})
			h.waitReady(1)
			st := h.svc.Status()[0]
			if got, want := h.getEnv("handoff-0", tc.env), fmt.Sprintf(tc.want, st.Port); got != want {
				t.Errorf("%s=%q, want %q", tc.env, got, want)
			}
			if tc.env != "PORT" && os.Getenv("PORT") == "" {
				if got := h.getEnv("handoff-0", "PORT"); got != "" {
					t.Errorf("PORT=%q set as well", got)
				}
			}
		})
	}
}

// TestWrongPortSaidAtStart: a replica that listens on another port than
// the one it was given is named with both addresses and the variable, in
// one event and in WaitReady's error, which comes before WaitReady's own
// deadline.
func TestWrongPortSaidAtStart(t *testing.T) {
	t.Parallel()
	other, err := netport.Free(1)
	if err != nil {
		t.Fatal(err)
	}
	h := startService(t, ServiceSpec{Name: "elsewhere", Replicas: 1,
		Env:    map[string]string{"LISTEN_ON": fmt.Sprintf("127.0.0.1:%d", other[0])},
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 0, 0)}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	err = h.svc.WaitReady(ctx, 1)
	if err == nil {
		t.Fatal("WaitReady succeeded for a replica listening on the wrong port")
	}
	t.Logf("WaitReady error:\n%v", err)
	port := h.svc.Status()[0].Port
	want := fmt.Sprintf("replica elsewhere-0 listens on 127.0.0.1:%d, not on its port 127.0.0.1:%d given in $PORT; set services[].port.env",
		other[0], port)
	if !errors.Is(err, ErrListensElsewhere) || !strings.Contains(err.Error(), want) || ctx.Err() != nil {
		t.Errorf("error does not say %q before the deadline (ctx: %v)", want, ctx.Err())
	}
	notes := h.waitEvents("port mismatch note", 1, func(e event.Event) bool {
		return e.Kind == event.Note && e.Reason == "PortMismatch" && e.Pod == "elsewhere-0"
	})
	if len(notes) != 1 || !strings.Contains(notes[0].Detail, want) {
		t.Errorf("notes %+v, want one saying %q", notes, want)
	}
	// Three refused probes before giving up, not one.
	if n := count(h.log.Events(), func(e event.Event) bool { return e.Kind == event.ProbeResult && !e.OK }); n < PortMismatchProbes {
		t.Errorf("gave up after %d failed probes, want >= %d", n, PortMismatchProbes)
	}
}

func TestParseListening(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 00000000:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 100 0 0 10 0
`
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1F92 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F93 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6666 1 0000000000000000 100 0 0 10 0
`
	ours := map[string]bool{"1111": true, "2222": true, "4444": true, "5555": true, "6666": true}
	var got []string
	for _, table := range []string{tcp, tcp6} {
		addrs, err := parseListening(bufio.NewScanner(strings.NewReader(table)), ours)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			got = append(got, a.String())
		}
	}
	want := "127.0.0.1:8080 0.0.0.0:9090 [::]:8081 [::1]:8082 127.0.0.1:8083"
	if strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
}

// TestListenersOfThisProcess: the listeners of a live process tree are
// read from /proc.
func TestListenersOfThisProcess(t *testing.T) {
	h := startService(t, ServiceSpec{Name: "lsn", Replicas: 1,
		Probes: scenario.Probes{ReadinessProbe: httpProbe("/ready", 1, 0, 0)}})
	h.waitReady(1)
	st := h.svc.Status()[0]
	addrs, err := listeners(st.PID)
	if err != nil {
		t.Fatal(err)
	}
	want := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(st.Port))
	if len(addrs) != 1 || addrs[0] != want {
		t.Errorf("listeners %v, want [%s]", addrs, want)
	}
}

// TestRunSetup: a setup step's output goes to its log; exit 0 passes; a
// non-zero exit, a start failure and a timeout are errors that name the
// service and show the last lines; nothing of its process group outlives
// it.
func TestRunSetup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(name string, timeout time.Duration, argv ...string) (string, *event.Log, error) {
		log := &event.Log{}
		path := filepath.Join(dir, "logs", name+"-setup.log")
		err := RunSetup(context.Background(), event.NewClock(), log, SetupSpec{Service: name, Command: argv,
			Env: os.Environ(), Timeout: timeout, LogPath: path}, nil)
		b, _ := os.ReadFile(path)
		return string(b), log, err
	}

	out, log, err := run("ok", 0, "sh", "-c", `echo migrating; sleep 300 & echo "child $!"; echo done >&2`)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if !strings.Contains(out, "migrating\n") || !strings.Contains(out, "done\n") || !strings.Contains(out, "[drill] setup exited with code 0 (Completed)") {
		t.Errorf("log:\n%s", out)
	}
	var child int
	for _, l := range strings.Split(out, "\n") {
		if c, ok := strings.CutPrefix(l, "child "); ok {
			child, _ = strconv.Atoi(c)
		}
	}
	if child == 0 || !waitGone(child, 10*time.Second) {
		t.Errorf("the setup's background child %d outlived it", child)
	}
	var notes []string
	for _, e := range log.Events() {
		notes = append(notes, e.Service+" "+e.Reason+": "+e.Detail)
	}
	if len(notes) != 2 || notes[0] != "ok Setup: setup started" || !strings.HasPrefix(notes[1], "ok Setup: setup exited with code 0 (Completed) after ") {
		t.Errorf("events %q", notes)
	}

	var lines []string
	for i := range 15 {
		lines = append(lines, fmt.Sprintf("echo line %d", i))
	}
	_, log, err = run("migrate", 0, "sh", "-c", strings.Join(lines, "; ")+`; echo "ERROR: relation \"orders\" already exists" >&2; exit 3`)
	if err == nil {
		t.Fatal("a setup exiting 3 passed")
	}
	for _, want := range []string{
		"setup of service migrate failed: exited with code 3 (Error) after ",
		"(all of it in " + filepath.Join(dir, "logs", "migrate-setup.log") + "):\n  | line 6\n",
		"  | line 14\n  | ERROR: relation \"orders\" already exists",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "line 5\n") {
		t.Errorf("error shows more than the last %d lines:\n%v", setupTailLines, err)
	}
	if ev := log.Events(); len(ev) != 2 || ev[1].Reason != "SetupFailed" {
		t.Errorf("events %+v", ev)
	}

	_, _, err = run("nosuch", 0, "/nonexistent/migrate")
	if err == nil || !strings.Contains(err.Error(), "setup of service nosuch: start /nonexistent/migrate: ") {
		t.Errorf("missing program: %v", err)
	}

	_, _, err = run("slow", 300*time.Millisecond, "sh", "-c", "echo waiting for the lock; exec sleep 300")
	if err == nil || !strings.Contains(err.Error(), "setup of service slow did not finish within its timeout 300ms and was killed") ||
		!strings.Contains(err.Error(), "| waiting for the lock") {
		t.Errorf("timeout: %v", err)
	}
}

// TestRunSetupRedactsItsLog: a setup step whose arguments and output carry
// a secret (a migration tool printing its DSN, a --password flag) leaves
// none of it in its log when the run redacts.
func TestRunSetupRedactsItsLog(t *testing.T) {
	t.Parallel()
	const canary = "canary-setup-s3cret-7731"
	path := filepath.Join(t.TempDir(), "logs", "db-setup.log")
	r := redact.New(redact.Options{Values: []string{canary}})
	err := RunSetup(context.Background(), event.NewClock(), &event.Log{}, SetupSpec{Service: "db",
		Command: []string{"sh", "-c", `echo "connecting to postgres://app:$1@127.0.0.1/app"; echo "key $1" >&2`, "sh", canary},
		Env:     os.Environ(), LogPath: path, Redact: r}, nil)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), canary) || !strings.Contains(string(b), "connecting to postgres://REDACTED@127.0.0.1/app") {
		t.Errorf("setup log leaks the secret or lost its output:\n%s", b)
	}
}
