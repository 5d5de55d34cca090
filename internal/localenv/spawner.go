package localenv

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/drillhq/drill/internal/placement"
)

// spawner starts processes from one OS thread that stays alive until close,
// so that PR_SET_PDEATHSIG (which fires when the *thread* that forked the
// child exits, not the process) only fires when drill itself dies. The
// thread first enters its placement group (a cgroup, a nice value), so
// every process it starts begins there, before it runs any code.
type spawner struct {
	reqs  chan spawnReq
	done  chan struct{}
	group *placement.Group
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// newSpawner starts the spawning thread in group g (nil: where drill is).
// Errors: the thread could not enter g; then no thread is left.
func newSpawner(g *placement.Group) (*spawner, error) {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{}), group: g}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is unlocked only once every child has been reaped
		// and the thread is back where drill runs; otherwise it exits
		// with this goroutine (or, the main thread, is parked for good).
		defer close(s.done)
		leave, err := g.EnterThread()
		if err != nil {
			ready <- err
			return
		}
		ready <- nil
		for r := range s.reqs {
			r.err <- r.cmd.Start()
		}
		if leave() == nil {
			runtime.UnlockOSThread()
		}
	}()
	if err := <-ready; err != nil {
		<-s.done
		return nil, fmt.Errorf("place the replica's processes: %w", err)
	}
	return s, nil
}

// start starts cmd in its own process group with SIGKILL as its parent-death
// signal. It must not be called after close.
func (s *spawner) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	s.group.Prepare(cmd)
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
