package compose

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/composefile"
)

// What the platform's faults (pod-kill, rollout) do to a Compose
// service's containers. The engine marks a container stopped or killed
// through its API as stopped by hand, and its restart policy (any of
// them, always included) does not start it again; so drill starts it
// again itself, as a ReplicaSet replaces a deleted pod ([Stack.Stop],
// then [Stack.StartAgain]).

// ServiceContainers returns the containers of service in start order:
// one, since drill runs every Compose service as one container (no
// scale, no deploy.replicas); none when service is not in the stack.
func (st *Stack) ServiceContainers(service string) []*Container {
	var out []*Container
	for _, c := range st.Containers {
		if c.Service == service {
			out = append(out, c)
		}
	}
	return out
}

// StopGrace returns how long the engine waits after SIGTERM before
// SIGKILL when it stops a container of service: the Compose file's
// stop_grace_period, or the engine's default (10 s).
func (st *Stack) StopGrace(service string) time.Duration {
	if st.Project != nil {
		if s, ok := st.Project.Service(service); ok {
			return s.Grace()
		}
	}
	return composefile.DefaultStopGrace
}

// Ended is how a container's process ended.
type Ended struct {
	// ExitCode is the engine's: 128+n for a process ended by signal n
	// (137 for SIGKILL).
	ExitCode int
	// OOMKilled says the kernel's OOM killer ended it.
	OOMKilled bool
	// At is when it ended (the engine's wall clock).
	At time.Time
}

// String says how the process ended, e.g. "exited with code 0" or
// "killed by SIGKILL (exit code 137)".
func (e Ended) String() string {
	switch {
	case e.OOMKilled:
		return fmt.Sprintf("OOM-killed (exit code %d)", e.ExitCode)
	case e.ExitCode == 137:
		return "killed by SIGKILL (exit code 137)"
	case e.ExitCode == 143:
		return "ended by SIGTERM (exit code 143)"
	}
	return fmt.Sprintf("exited with code %d", e.ExitCode)
}

// Stop ends c's process and returns once the container no longer runs:
// with kill false as `docker stop` does (SIGTERM, then SIGKILL when the
// service's stop grace period is over: the engine's own timer, from the
// container's stop timeout), with kill true by SIGKILL at once. A
// container that does not run already is left as it is and its last end
// returned. The engine's restart policy does not start a container
// stopped this way again. Errors: the engine's, or ctx ending first.
func (st *Stack) Stop(ctx context.Context, c *Container, kill bool) (Ended, error) {
	in, err := st.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return Ended{}, fmt.Errorf("inspect container %s: %w", c.Name, err)
	}
	if s := in.Container.State; s == nil || !s.Running && !s.Restarting {
		return ended(in.Container), nil
	}
	if kill {
		if _, err := st.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
			return Ended{}, fmt.Errorf("kill container %s: %w", c.Name, err)
		}
	} else {
		// Timeout nil: the container's stop timeout (stop_grace_period),
		// else the engine's default. The call returns once it stopped.
		if _, err := st.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{}); err != nil {
			return Ended{}, fmt.Errorf("stop container %s: %w", c.Name, err)
		}
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		in, err := st.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return Ended{}, fmt.Errorf("inspect container %s: %w", c.Name, err)
		}
		if s := in.Container.State; s != nil && !s.Running && !s.Restarting {
			st.log.Info("container stopped", "service", c.Service, "container", c.Name, "kill", kill, "ended", ended(in.Container).String())
			return ended(in.Container), nil
		}
		select {
		case <-ctx.Done():
			return Ended{}, fmt.Errorf("container %s still runs: %w", c.Name, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// ended reads a stopped container's last end.
func ended(in container.InspectResponse) Ended {
	s := in.State
	if s == nil {
		return Ended{}
	}
	at, _ := time.Parse(time.RFC3339Nano, s.FinishedAt)
	return Ended{ExitCode: s.ExitCode, OOMKilled: s.OOMKilled, At: at}
}

// Running reports whether c's container runs now (restarting counts as
// not running).
func (st *Stack) Running(ctx context.Context, c *Container) (bool, error) {
	in, err := st.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return false, fmt.Errorf("inspect container %s: %w", c.Name, err)
	}
	s := in.Container.State
	return s != nil && s.Running && !s.Restarting, nil
}

// StartAgain starts c's stopped container again (a container that runs
// is left alone) and reads its address on the project network and its
// published ports again: the engine gives a started container the lowest
// free address, not necessarily its former one, and a host port it picks
// (127.0.0.1::80) anew, so c's IP and Published may change (logged).
func (st *Stack) StartAgain(ctx context.Context, c *Container) error {
	if _, err := st.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container %s again: %w", c.Name, err)
	}
	in, err := st.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", c.Name, err)
	}
	ns := in.Container.NetworkSettings
	if ns == nil {
		return fmt.Errorf("container %s has no network settings after its start", c.Name)
	}
	if ep := ns.Networks[st.Network]; ep != nil && ep.IPAddress.IsValid() {
		if ip := ep.IPAddress.String(); ip != c.IP {
			st.log.Info("container has a new address", "service", c.Service, "container", c.Name, "was", c.IP, "now", ip)
			c.IP = ip
		}
	}
	for target, was := range c.Published {
		port, _ := network.PortFrom(uint16(target), network.TCP)
		for _, b := range ns.Ports[port] {
			if b.HostIP.IsLoopback() && b.HostPort != "" {
				if now := net.JoinHostPort(b.HostIP.String(), b.HostPort); now != was {
					st.log.Warn("container's port is published elsewhere now", "service", c.Service, "container", c.Name, "port", target, "was", was, "now", now)
					c.Published[target] = now
				}
				break
			}
		}
	}
	st.log.Info("container started again", "service", c.Service, "container", c.Name, "ip", c.IP)
	return nil
}

// WaitServing waits until c's container is serving as Traefik's Docker
// provider counts it (running and healthy, or running without a
// healthcheck), bounded by ctx. Unlike [Stack.WaitHealthy] an unhealthy
// status is not an error (a later check may pass, as a pod's readiness
// may); a container that exited and is not restarting is. The error
// names its last health outputs.
func (st *Stack) WaitServing(ctx context.Context, c *Container) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := "not inspected yet"
	for {
		in, err := st.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("inspect %s: %w", c.Name, err)
		}
		if err == nil && in.Container.State != nil {
			s := in.Container.State
			switch {
			case s.Running && s.Health == nil:
				return nil
			case s.Running && s.Health.Status == container.Healthy:
				return nil
			case !s.Running && !s.Restarting:
				return fmt.Errorf("%s %s", c.Name, ended(in.Container))
			case s.Health != nil:
				last = "health " + string(s.Health.Status)
				if o := lastOutputs(s.Health, 2); o != "" {
					last += " (" + o + ")"
				}
			default:
				last = "state " + strings.ToLower(string(s.Status))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving (%s): %w", c.Name, last, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// PodName is the name the platform's faults give container i of a
// Compose service in a scenario (pods: [api-0]): <service>-<i>, from 0,
// as the local runtime names its replicas.
func PodName(service string, i int) string { return service + "-" + strconv.Itoa(i) }
