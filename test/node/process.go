package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one node part running in its own process group with its
// output in a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// startProcess starts bin with args in a new process group with PDEATHSIG
// SIGKILL (a killed test takes its children along; what they started in
// turn is swept by the next Start, see sweep), output appended to logPath.
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError says how the process ended, with the tail of its log.
func (p *process) exitError() error {
	b, _ := os.ReadFile(p.logPath)
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.waitErr, tail(string(b), 3000))
}

// stop sends SIGTERM to the group, waits up to grace, then SIGKILLs the
// group and waits up to 10 s for the leader to be reaped.
func (p *process) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	if !p.exited() && grace > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s process group %d: %w", p.name, pgid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop %s (pid %d): not reaped 10 s after SIGKILL", p.name, pgid)
	}
}

// waitHTTP200 polls url every 250 ms until it answers 200, p exits, timeout
// passes or ctx ends. TLS certificates are not verified: these are the
// loopback health endpoints of parts that serve self-signed certificates;
// only their status code is read.
func waitHTTP200(ctx context.Context, p *process, url string, timeout time.Duration) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback health probe
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if p.exited() {
			return fmt.Errorf("wait for %s: %w", url, p.exitError())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s: not 200 after %s; last answer: %s", url, timeout, tail(last, 1500))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", url, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// run runs a short command and returns its combined output, or an error
// carrying it.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tail(strings.TrimSpace(string(out)), 1500))
	}
	return string(out), nil
}
