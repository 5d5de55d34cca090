package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/testutil"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// Points of a fault at which the tests interrupt drill run, found from its
// -v log rather than by sleeping blindly.
const (
	atBringUp     = "bring-up"     // waiting for the replicas to be ready
	beforeFault   = "before-fault" // load running, fault not yet on (it turns on at 6 s)
	atFaultOn     = "at-fault-on"  // the moment drill logs "fault on"
	duringFault   = "during-fault" // 2 s into the fault, a query through it hangs
	logReady      = `msg="waiting for replicas to be ready"`
	logOnPath     = `msg="fault is on the traffic path"`
	logFaultOn    = `msg="fault on"`
	logStopping   = "stopping gracefully"
	logPGStarted  = `msg="postgres started"`
	exitCouldNot  = 3
	faultAt       = "6s"
	faultName     = "pg-pause"
	pauseFault    = "pg-stop"
	endOfRunFault = "fault-off(end of run)"
)

type signalCase struct {
	name    string
	point   string
	signals []syscall.Signal
}

// TestSignalsRemoteToxiproxy starts drill run as a child process against a
// toxiproxy-server (remote mode, proxy already in place as in staging) in
// front of a throwaway PostgreSQL, and interrupts it with SIGINT, SIGTERM,
// SIGINT twice and SIGKILL at several points of a timeout-0 pause. After
// each (and drill cleanup after SIGKILL) the server holds no drill toxic,
// PostgreSQL answers through the proxy at its normal latency and no process
// of the run remains (docs/DESIGN.md §15, §16).
func TestSignalsRemoteToxiproxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process for about two minutes")
	}
	drill, tpBin := binaries(t)
	pg := testutil.Postgres(t)
	tp := startToxiproxy(t, tpBin)
	exe := testproc.Executable(t)
	cases := []signalCase{
		{"sigterm-bring-up", atBringUp, []syscall.Signal{syscall.SIGTERM}},
		{"sigint-before-fault", beforeFault, []syscall.Signal{syscall.SIGINT}},
		{"sigint-at-fault-on", atFaultOn, []syscall.Signal{syscall.SIGINT}},
		{"sigint-during-fault", duringFault, []syscall.Signal{syscall.SIGINT}},
		{"sigterm-at-fault-on", atFaultOn, []syscall.Signal{syscall.SIGTERM}},
		{"sigterm-during-fault", duringFault, []syscall.Signal{syscall.SIGTERM}},
		{"sigint-twice-during-fault", duringFault, []syscall.Signal{syscall.SIGINT, syscall.SIGINT}},
		{"sigkill-at-fault-on", atFaultOn, []syscall.Signal{syscall.SIGKILL}},
		{"sigkill-during-fault", duringFault, []syscall.Signal{syscall.SIGKILL}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCase(t)
			proxy := "pg-" + strconv.Itoa(i)
			listen := tp.createProxy(t, proxy, pg.Addr)
			direct := dsnVia(t, pg.DSN, listen)
			baseline := selectOneLatency(t, direct, 5)
			// Whatever happens, leave the shared server clean for the
			// next case (runs after drill is killed: cleanups are LIFO).
			cleanupRun(t, c, drill, tp.URL)
			scenario := c.writeScenario(t, "toxic-pause.yaml.tmpl", map[string]string{
				"Name": tc.name, "ToxiproxyURL": tp.URL, "Proxy": proxy, "Listen": listen, "Upstream": pg.Addr, "ServiceExe": exe,
				"DatabaseURL": fmt.Sprintf("postgres://%s@${proxies.%s.addr}/%s?sslmode=disable&connect_timeout=2", pg.User, proxy, pg.Database),
				"FaultAt":     faultAt,
			})
			p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)

			reachPoint(t, p, tc.point, func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := selectOne(ctx, direct); err == nil {
					t.Fatal("during the fault a SELECT 1 through the proxy answered; want it to hang")
				}
				if left := tp.drillToxics(t); len(left) == 0 {
					t.Fatal("during the fault the server holds no drill toxic")
				}
			})
			interrupt(t, p, tc.signals)

			if tc.signals[0] == syscall.SIGKILL {
				if _, sig := p.exit(); sig != syscall.SIGKILL {
					t.Fatalf("drill ended by signal %v, want SIGKILL", sig)
				}
				left := tp.drillToxics(t)
				if len(left) == 0 || !strings.Contains(left[0], inject.RunPrefix(c.RunID)) {
					t.Fatalf("after SIGKILL at %s the server holds %v; want this run's toxics (the test needs them to prove cleanup)", tc.point, left)
				}
				requireNoProcesses(t, c) // replicas die with drill (parent-death signal)
				code, out := runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--toxiproxy", tp.URL, "--state-dir", c.State)
				if code != 0 || !strings.Contains(out, "removed") {
					t.Fatalf("drill cleanup: exit %d, stdout %q; want 0 and removed toxics", code, out)
				}
			} else {
				code, _ := p.exit()
				if code != exitCouldNot {
					t.Fatalf("drill run exit code %d after %v at %s, want %d", code, tc.signals, tc.point, exitCouldNot)
				}
				checkReports(t, c, p, tc, faultName)
			}

			if left := tp.drillToxics(t); len(left) > 0 {
				t.Fatalf("drill toxics remain on the server: %v", left)
			}
			ps, err := tp.Proxies()
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := ps[proxy]; !ok || !got.Enabled || got.Listen != listen {
				t.Fatalf("the adopted proxy %s changed: %+v (present %v); want it left in place, enabled, on %s", proxy, got, ok, listen)
			}
			requireNormalLatency(t, direct, baseline)
			requireNoProcesses(t, c)
			// The journal agrees: nothing of the run is left to undo.
			if code, out := runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--toxiproxy", tp.URL, "--state-dir", c.State); code != 0 || !strings.Contains(out, "nothing to clean up") {
				t.Fatalf("drill cleanup after the run: exit %d, stdout %q; want 0 and nothing to clean up", code, out)
			}
		})
	}
}

// TestSignalsProcessPause pauses the local PostgreSQL drill starts
// (SIGSTOP of its process tree) under the order-gateway reference service
// and interrupts drill run with Ctrl-C (SIGINT) during the pause: the pause
// is undone, drill exits 3 with its reports, and no process of the run
// remains.
func TestSignalsProcessPause(t *testing.T) {
	if testing.Short() {
		t.Skip("runs drill as a child process")
	}
	drill, _ := binaries(t)
	for _, tc := range []signalCase{
		{"sigint-during-pause", duringFault, []syscall.Signal{syscall.SIGINT}},
		{"sigint-twice-during-pause", duringFault, []syscall.Signal{syscall.SIGINT, syscall.SIGINT}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p, pgid := startProcessPause(t, drill, tc.name)
			states := watchStates(pgid)
			interrupt(t, p, tc.signals)
			code, _ := p.exit()
			seen := states()
			if code != exitCouldNot {
				t.Fatalf("drill run exit code %d, want %d", code, exitCouldNot)
			}
			// The postmaster was stopped (T) and ran again (S, R or D)
			// before it ended: the pause was undone, not killed away.
			if !resumedAfterStop(seen) {
				t.Fatalf("postmaster %d states after the interrupt %q; want it resumed (S/R/D) before it ended", pgid, seen)
			}
			checkReports(t, c, p, signalCase{point: duringFault, signals: tc.signals}, pauseFault)
			requireNoProcesses(t, c)
			if code, out := runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--state-dir", c.State); code != 0 || !strings.Contains(out, "nothing to clean up") {
				t.Fatalf("drill cleanup after the run: exit %d, stdout %q; want 0 and nothing to clean up", code, out)
			}
		})
	}
}

// startProcessPause runs the process-pause scenario until 2 s into the
// pause, checks that the postmaster is stopped, and returns the case, the
// running drill and the postmaster's process group.
func startProcessPause(t *testing.T, drill, name string) (*caseEnv, *drillProc, int) {
	t.Helper()
	c := newCase(t)
	t.Cleanup(func() { killProcesses(c) })
	scenario := c.writeScenario(t, "process-pause.yaml.tmpl", map[string]string{"Name": name, "FaultAt": "3s"})
	p := startDrill(t, c, drill, "run", "-v", "--state-dir", c.State, "--out", c.Out, "--run-id", c.RunID, scenario)
	pgid, err := strconv.Atoi(logValue(p.waitLine(logPGStarted), "pgid"))
	if err != nil || pgid <= 1 {
		t.Fatalf("no postmaster pgid in drill's log: %v", err)
	}
	p.waitLine(logFaultOn)
	if !eventually(10*time.Second, func() bool { return procState(pgid) == "T" }) {
		t.Fatalf("postmaster %d state %q during the pause, want T (stopped)", pgid, procState(pgid))
	}
	time.Sleep(2 * time.Second)
	if s := procState(pgid); s != "T" {
		t.Fatalf("postmaster %d state %q 2 s into the pause, want T (stopped)", pgid, s)
	}
	return c, p, pgid
}

// reachPoint waits until drill reaches point; during is called at
// duringFault (1 s into the fault) to prove the fault is in effect.
func reachPoint(t *testing.T, p *drillProc, point string, during func()) {
	t.Helper()
	switch point {
	case atBringUp:
		p.waitLine(logReady)
	case beforeFault:
		p.waitLine(logOnPath)
		time.Sleep(time.Second) // load starts right after the check; the fault at 6 s
		if p.hasLine(logFaultOn) {
			t.Fatal("the fault turned on before the interrupt; the before-fault point was missed")
		}
	case atFaultOn:
		p.waitLine(logFaultOn)
	case duringFault:
		p.waitLine(logFaultOn)
		time.Sleep(time.Second)
		during()
	default:
		t.Fatalf("unknown point %q", point)
	}
}

// interrupt sends the signals; before a repeated one it waits until drill
// said it is stopping, so the second really is a second interrupt.
func interrupt(t *testing.T, p *drillProc, sigs []syscall.Signal) {
	t.Helper()
	for i, sig := range sigs {
		if i > 0 {
			p.waitLine(logStopping)
		}
		p.signal(sig)
	}
}

// checkReports checks drill's account of an interrupted run: it said it was
// stopping; after one interrupt past bring-up it wrote its reports with
// exit code 3, verified cleanup and the fault's on/off events.
func checkReports(t *testing.T, c *caseEnv, p *drillProc, tc signalCase, fault string) {
	t.Helper()
	if !p.hasLine(logStopping) {
		t.Fatalf("drill did not say it is stopping after %v", tc.signals)
	}
	if tc.point == atBringUp {
		return // no load ran: no verdict to report
	}
	if len(tc.signals) > 1 {
		return // a second interrupt may skip the reports
	}
	rec := readReports(t, c.Out)
	if rec.ExitCode != exitCouldNot || rec.RunID != c.RunID || !rec.Cleanup.Verified || rec.Aborted == "" {
		t.Fatalf("run.json: exit %d run %s verified %v aborted %q; want %d, %s, true, why", rec.ExitCode, rec.RunID, rec.Cleanup.Verified, rec.Aborted, exitCouldNot, c.RunID)
	}
	ev := rec.faultEvents(fault)
	switch tc.point {
	case beforeFault:
		if len(ev) != 0 {
			t.Fatalf("run.json fault events %v; want none (interrupted before the fault)", ev)
		}
	default:
		if len(ev) != 2 || !strings.HasPrefix(ev[0], "fault-on(") || ev[1] != endOfRunFault {
			t.Fatalf("run.json fault events %v; want fault-on then %s", ev, endOfRunFault)
		}
	}
}

// watchStates polls the state of pid every 2 ms until it is gone (or 90 s)
// and returns a function that waits for the end of the watch and returns
// the distinct successive states seen, e.g. "TSR".
func watchStates(pid int) func() string {
	var (
		mu  sync.Mutex
		out []byte
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			s := procState(pid)
			if s == "" || s == "Z" || s == "X" {
				return
			}
			mu.Lock()
			if len(out) == 0 || out[len(out)-1] != s[0] {
				out = append(out, s[0])
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() string {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return string(out)
	}
}

// resumedAfterStop reports whether states has a running state after a T.
func resumedAfterStop(states string) bool {
	i := strings.IndexByte(states, 'T')
	return i >= 0 && strings.ContainsAny(states[i+1:], "SRDI")
}

// eventually polls cond every 50 ms for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cleanupRun registers, at the end of the test, `drill cleanup` of c's run
// against the Toxiproxy at tpURL, then the kill of any process of the run
// left.
func cleanupRun(t *testing.T, c *caseEnv, drill, tpURL string) {
	t.Cleanup(func() {
		_, _ = runDrill(t, c, drill, "cleanup", "--run", c.RunID, "--toxiproxy", tpURL, "--state-dir", c.State)
		killProcesses(c)
	})
}

// killProcesses SIGKILLs whatever of the case is still running, so a failed
// case leaves nothing behind on the machine.
func killProcesses(c *caseEnv) {
	for _, p := range processesOf(c) {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}
