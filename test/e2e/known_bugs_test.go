package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/testutil"
)

// remoteCase builds drill, starts PostgreSQL and toxiproxy-server and
// makes a case whose run is cleaned up at the end of the test.
func remoteCase(t *testing.T) (drill string, pg *dependencies.Postgres, tp *toxiproxyServer, c *caseEnv) {
	t.Helper()
	drill, tpBin := binaries(t)
	pg = testutil.Postgres(t)
	tp = startToxiproxy(t, tpBin)
	c = newCase(t)
	cleanupRun(t, c, drill, tp.URL)
	return drill, pg, tp, c
}

// TestKnownBugAdoptProxyWithoutListen: a scenario naming a proxy that
// already exists on a remote Toxiproxy, without listen (as staging
// scenarios do), must adopt it. The scenario defaults fill Proxy.Listen
// with 127.0.0.1:0, so EnsureProxy compares "127.0.0.1:0" with the real
// listen address and refuses the proxy (exit 3).
func TestKnownBugAdoptProxyWithoutListen(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process")
	}
	drill, pg, tp, c := remoteCase(t)
	tp.createProxy(t, "pg", pg.Addr)
	scenario := c.writeScenario(t, "order-gateway-remote.yaml.tmpl", map[string]string{
		"Name": "adopt", "ToxiproxyURL": tp.URL, "Proxy": "pg", "Upstream": pg.Addr,
		"DatabaseURL": fmt.Sprintf("postgres://%s@${proxies.pg.addr}/%s?sslmode=disable", pg.User, pg.Database),
	})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	p.exit()
	if p.hasLine("exists at") || !p.hasLine(`msg="proxy ready"`) {
		t.Fatal("drill refused to adopt the existing proxy pg (see its log)")
	}
}

// TestKnownBugOnPathPooledRemote: with a remote toxiproxy-server (which
// counts a connection's bytes only when it closes) in front of a service
// that keeps pooled PostgreSQL connections (order-gateway, like most real
// services), the fault-on-path check sees no bytes move and ends the run
// with exit 4 "would miss the traffic", although every query goes through
// the proxy.
func TestKnownBugOnPathPooledRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process")
	}
	drill, pg, tp, c := remoteCase(t)
	listen := tp.createProxy(t, "pg", pg.Addr)
	scenario := c.writeScenario(t, "order-gateway-remote.yaml.tmpl", map[string]string{
		"Name": "pooled", "ToxiproxyURL": tp.URL, "Proxy": "pg", "Listen": listen, "Upstream": pg.Addr,
		"DatabaseURL": fmt.Sprintf("postgres://%s@${proxies.pg.addr}/%s?sslmode=disable", pg.User, pg.Database),
	})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	code, _ := p.exit()
	if p.hasLine("would miss the traffic") || !p.hasLine(logFaultOn) {
		t.Fatalf("exit %d: drill judged the fault off the traffic path, yet order-gateway reaches PostgreSQL only through the proxy", code)
	}
}

// TestKnownBugSIGKILLDuringProcessPause: drill is SIGKILLed while the local
// PostgreSQL is paused. The postmaster dies with drill (parent-death
// signal), but its children (backends, checkpointer, ...) live in their own
// sessions and stay stopped. drill cleanup must continue them (they then
// see the postmaster gone and exit); today it reports the process group as
// gone, because the journal holds only the PGID (the stopped PIDs are not
// journaled) and the group's leader is dead.
func TestKnownBugSIGKILLDuringProcessPause(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process")
	}
	drill, _ := binaries(t)
	c, p, _ := startProcessPause(t, drill, "sigkill-during-pause")
	p.signal(syscall.SIGKILL)
	if _, sig := p.exit(); sig != syscall.SIGKILL {
		t.Fatalf("drill ended by signal %v, want SIGKILL", sig)
	}
	// Give the parent-death signals a moment, then see what is left.
	eventually(10*time.Second, func() bool {
		for _, pr := range processesOf(c) {
			if pr.State != "T" {
				return false
			}
		}
		return true
	})
	stopped := processesOf(c)
	t.Logf("after SIGKILL, processes of the run:\n%s", joinProcs(stopped))
	code, out := runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--state-dir", c.State)
	t.Logf("drill cleanup: exit %d\n%s", code, out)
	if code != 0 {
		t.Fatalf("drill cleanup exit %d, want 0", code)
	}
	if !eventually(30*time.Second, func() bool { return len(processesOf(c)) == 0 }) {
		left := processesOf(c)
		var st []string
		for _, pr := range left {
			st = append(st, pr.State)
		}
		t.Fatalf("after drill cleanup %d processes of the run remain (states %s):\n%s", len(left), strings.Join(st, ""), joinProcs(left))
	}
}
