package inject

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// bins holds the toxiproxy-server binary, built once per test binary.
var bins testproc.Builds

func TestMain(m *testing.M) {
	testproc.HelperMain(podServerEnv, podServer)
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// buildToxiproxyServer builds github.com/Shopify/toxiproxy/v2/cmd/server at
// the version in go.mod.
func buildToxiproxyServer(t *testing.T) string {
	t.Helper()
	return bins.Build(t, ".", testproc.Target{Name: "toxiproxy-server", Pkg: "github.com/Shopify/toxiproxy/v2/cmd/server"})["toxiproxy-server"]
}

// startRemoteServer runs toxiproxy-server on a free loopback port with proxy
// metrics, kills it at the end of the test and returns a Remote for it.
func startRemoteServer(t *testing.T) *Remote {
	t.Helper()
	bin := buildToxiproxyServer(t)
	var port int
	var cmd *exec.Cmd
	for attempt := 0; attempt < 3; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd = exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-proxy-metrics")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { // drain its log
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
			}
		}()
		r := NewRemote("http://127.0.0.1:" + strconv.Itoa(port))
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := r.Proxies(ctx)
			cancel()
			if err == nil {
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				})
				return r
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatalf("toxiproxy-server did not answer on port %d", port)
	return nil
}

// startEmbedded returns an embedded server closed at the end of the test.
func startEmbedded(t *testing.T) *Embedded {
	t.Helper()
	e, err := NewEmbedded(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close embedded: %v", err)
		}
	})
	return e
}

// modes runs fn against an embedded and a remote Toxiproxy.
func modes(t *testing.T, fn func(t *testing.T, tp Toxiproxy)) {
	t.Run("embedded", func(t *testing.T) { fn(t, startEmbedded(t)) })
	t.Run("remote", func(t *testing.T) { fn(t, startRemoteServer(t)) })
}

func dur(d time.Duration) *scenario.Duration { return &scenario.Duration{Duration: d} }

func ptr[T any](v T) *T { return &v }

// testEnv returns an Env with a journal in a temp state dir.
func testEnv(t *testing.T, tp Toxiproxy) (*Env, string) {
	t.Helper()
	state := t.TempDir()
	run := NewRunID(time.Now())
	j, err := OpenJournal(state, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return &Env{Toxiproxy: tp, RunID: run, Journal: j}, state
}
