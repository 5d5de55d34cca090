// Package docker holds drill's one way to reach the Docker engine: the
// client testcontainers-go would use (DOCKER_HOST, docker context, default
// socket), pinged before use, and the local-image check. drill never pulls
// images; an image it needs must already be in the local engine. The fault
// injectors (container pause) and the dependency starters (PostgreSQL in a
// container) both use it, so neither imports the other.
package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// ErrNoDocker means no Docker engine answered.
var ErrNoDocker = errors.New("docker engine not available")

// ErrImageMissing means a container image is not present in the local
// Docker engine; drill never pulls images.
var ErrImageMissing = errors.New("image not present locally")

// Client returns a client for the Docker engine testcontainers-go would
// use (DOCKER_HOST, docker context, default socket), after a ping. Close it
// when done. Errors wrap [ErrNoDocker]. testcontainers-go panics in some
// helpers when no engine is found; the panic is turned into an error.
func Client(ctx context.Context) (cli *testcontainers.DockerClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			cli, err = nil, fmt.Errorf("%w: panic: %v", ErrNoDocker, r)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	if _, err := c.Ping(ctx, client.PingOptions{}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	return c, nil
}

// ImagePresent reports whether image is in the local engine. Errors wrap
// [ErrNoDocker] when no engine answers.
func ImagePresent(ctx context.Context, image string) (bool, error) {
	cli, err := Client(ctx)
	if err != nil {
		return false, err
	}
	defer cli.Close()
	return ImagePresentWith(ctx, cli, image)
}

// ImagePresentWith is [ImagePresent] on an open client.
func ImagePresentWith(ctx context.Context, cli *testcontainers.DockerClient, image string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return true, nil
}

func isNotFound(err error) bool {
	return cerrdefs.IsNotFound(err)
}
