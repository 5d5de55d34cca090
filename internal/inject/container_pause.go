package inject

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultContainerPause, newContainerPause) }

// ContainerPauser pauses and unpauses containers. [DockerPauser] is the real
// one.
type ContainerPauser interface {
	// Pause freezes the container's cgroup: TCP stays ESTABLISHED and
	// nothing answers.
	Pause(ctx context.Context, id string) error
	// Unpause thaws it. A container that is gone or not paused counts as
	// unpaused (nil).
	Unpause(ctx context.Context, id string) error
}

// DockerPauser talks to the local Docker engine through testcontainers-go's
// client (DOCKER_HOST, docker context or the default socket). Each call opens
// and closes its own client, so it holds nothing between faults.
type DockerPauser struct{}

var _ ContainerPauser = DockerPauser{}

// Pause implements [ContainerPauser].
func (DockerPauser) Pause(ctx context.Context, id string) error {
	cli, err := docker.Client(ctx)
	if err != nil {
		return fmt.Errorf("pause container %s: %w", id, err)
	}
	defer cli.Close()
	if _, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause container %s: %w", id, err)
	}
	return nil
}

// Unpause implements [ContainerPauser].
func (DockerPauser) Unpause(ctx context.Context, id string) error {
	cli, err := docker.Client(ctx)
	if err != nil {
		return fmt.Errorf("unpause container %s: %w", id, err)
	}
	defer cli.Close()
	if _, err := cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		ins, ierr := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(ierr):
			return nil // gone: nothing stays paused
		case ierr == nil && ins.Container.State != nil && !ins.Container.State.Paused:
			return nil
		}
		return fmt.Errorf("unpause container %s: %w", id, err)
	}
	return nil
}

// containerPause pauses a dependency's container and unpauses it on revert.
type containerPause struct {
	fault scenario.Fault
	env   *Env
	id    string
}

var (
	_ Injector  = (*containerPause)(nil)
	_ Describer = (*containerPause)(nil)
)

// newContainerPause builds the injector of a container-pause fault that
// has passed its spec's checks ([scenario.CheckFault]); the dependency
// must be one of env.Containers.
func newContainerPause(f scenario.Fault, env *Env) (Injector, error) {
	id, ok := env.Containers[f.Dependency]
	if !ok || id == "" {
		return nil, fmt.Errorf("dependency: %q is not a container; known: %s", f.Dependency, mapKeys(env.Containers))
	}
	return &containerPause{fault: f, env: env, id: id}, nil
}

func (c *containerPause) pauser() ContainerPauser {
	if c.env.Docker != nil {
		return c.env.Docker
	}
	return DockerPauser{}
}

// Describe implements [Describer].
func (c *containerPause) Describe() string {
	return fmt.Sprintf("pause container %.12s of dependency %s", c.id, c.fault.Dependency)
}

func (c *containerPause) entry(op string) Entry {
	return Entry{
		Op: op, Key: KindContainerPause + "/" + c.id, Kind: KindContainerPause, Fault: c.fault.Name,
		Container: c.id, Dependency: c.fault.Dependency,
	}
}

// Inject implements [Injector].
func (c *containerPause) Inject(ctx context.Context) (Revert, error) {
	if err := c.env.Journal.Record(c.entry(OpApply)); err != nil {
		return nil, fmt.Errorf("journal container pause: %w", err)
	}
	if err := c.pauser().Pause(ctx, c.id); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRevertTimeout)
		defer cancel()
		if rerr := c.unpause(rctx); rerr != nil {
			return nil, errors.Join(err, fmt.Errorf("undo partial fault: %w", rerr))
		}
		return nil, err
	}
	c.env.logger().Info("fault on", "fault", c.fault.Name, "what", c.Describe())
	return c.unpause, nil
}

func (c *containerPause) unpause(ctx context.Context) error {
	if err := c.pauser().Unpause(ctx, c.id); err != nil {
		return err
	}
	if err := c.env.Journal.Record(c.entry(OpRevert)); err != nil {
		return fmt.Errorf("journal revert of container pause: %w", err)
	}
	c.env.logger().Info("fault off", "fault", c.fault.Name, "what", c.Describe())
	return nil
}
