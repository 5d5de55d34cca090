package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one control-plane binary running in its own process group, with
// stdout and stderr going to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has been reaped
	waitErr error         // the result of cmd.Wait, valid after done is closed
}

// startProcess starts bin with args in a new process group (so that Stop can
// signal the whole group) with PDEATHSIG set to SIGKILL (so that a crashed
// test binary leaves nothing behind). Its output goes to logPath (created or
// truncated). It returns an error when the log file cannot be created or the
// binary cannot be started.
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended, with the tail of its log, for
// errors raised when it dies while starting.
func (p *process) exitError() error {
	b, _ := os.ReadFile(p.logPath)
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.waitErr, tail(string(b), 3000))
}

// stop sends SIGTERM to the process group, waits up to grace for the leader
// to exit (no SIGTERM when grace is 0), then sends SIGKILL to the group and waits up to 10 s more. It
// returns an error if the process is still not reaped after that, or if any
// member of the group is still alive.
func (p *process) stop(grace time.Duration) error {
	pgid := p.pid()
	if !p.exited() && grace > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	// Kill the whole group even if the leader already exited: a child it
	// started may still be alive.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s process group %d: %w", p.name, pgid, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop %s (pid %d): not reaped 10 s after SIGKILL", p.name, pgid)
	}
	// Signal 0 probes whether any process of the group remains; give a
	// reparented member a moment to be reaped by init.
	for i := 0; ; i++ {
		if err := syscall.Kill(-pgid, 0); err != nil {
			return nil
		}
		if i == 20 {
			return fmt.Errorf("stop %s: process group %d still has members", p.name, pgid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
