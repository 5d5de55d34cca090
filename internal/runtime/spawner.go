package runtime

import (
	"os/exec"
	"runtime"
	"syscall"
)

// spawner starts processes from one OS thread that stays alive until close,
// so that PR_SET_PDEATHSIG (which fires when the *thread* that forked the
// child exits, not the process) only fires when drill itself dies.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: when this goroutine returns the thread exits,
		// which is only allowed after every child has been reaped.
		defer close(s.done)
		for r := range s.reqs {
			r.err <- r.cmd.Start()
		}
	}()
	return s
}

// start starts cmd in its own process group with SIGKILL as its parent-death
// signal. It must not be called after close.
func (s *spawner) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	s.reqs <- r
	return <-r.err
}

// close ends the spawner's thread; call it only once every process it
// started has been reaped.
func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}
