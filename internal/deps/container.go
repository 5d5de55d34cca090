package deps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/drillhq/drill/internal/scenario"
)

// ErrNoDocker means no Docker engine answered.
var ErrNoDocker = errors.New("docker engine not available")

// ErrImageMissing means a container image is not present in the local
// Docker engine; drill never pulls images.
var ErrImageMissing = errors.New("image not present locally")

// containerPassword is the password of the container's superuser (a
// container cannot use trust auth over its mapped port by default).
const containerPassword = "drill"

// DockerClient returns a client for the Docker engine testcontainers-go would
// use (DOCKER_HOST, docker context, default socket), after a ping. Close it
// when done. Errors wrap [ErrNoDocker]. testcontainers-go panics in some
// helpers when no engine is found; the panic is turned into an error.
func DockerClient(ctx context.Context) (cli *testcontainers.DockerClient, err error) {
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
	cli, err := DockerClient(ctx)
	if err != nil {
		return false, err
	}
	defer cli.Close()
	return imagePresent(ctx, cli, image)
}

func imagePresent(ctx context.Context, cli *testcontainers.DockerClient, image string) (bool, error) {
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

// startPostgresContainer runs spec.Image with testcontainers-go's PostgreSQL
// module. The image must be present locally. testcontainers-go also starts
// its Ryuk reaper container unless TESTCONTAINERS_RYUK_DISABLED=true; without
// a registry that image must be present too.
func startPostgresContainer(ctx context.Context, spec scenario.PostgresDep, log *slog.Logger) (_ *Postgres, err error) {
	cli, err := DockerClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("start postgres container: %w", err)
	}
	ok, err := imagePresent(ctx, cli, spec.Image)
	_ = cli.Close()
	if err != nil {
		return nil, fmt.Errorf("start postgres container: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("start postgres container: %w: %s (drill never pulls; load it with docker load "+
			"or build it, or use mode binaries)", ErrImageMissing, spec.Image)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultPostgresStartTimeout)
	defer cancel()
	ctr, err := tcpostgres.Run(ctx, spec.Image,
		tcpostgres.WithDatabase(spec.Database),
		tcpostgres.WithUsername(spec.User),
		tcpostgres.WithPassword(containerPassword),
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections="+strconv.Itoa(spec.MaxConnections)),
		tcpostgres.BasicWaitStrategies(),
	)
	pg := &Postgres{User: spec.User, Database: spec.Database, Mode: scenario.PostgresContainer, log: log}
	if ctr != nil {
		pg.ContainerID = ctr.GetContainerID()
		pg.terminate = func(ctx context.Context) error { return testcontainers.TerminateContainer(ctr) }
	}
	defer func() {
		if err != nil {
			_ = pg.Close(context.WithoutCancel(ctx))
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("start postgres container %s: %w", spec.Image, err)
	}
	host, err := ctr.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("read postgres container host: %w", err)
	}
	port, err := ctr.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return nil, fmt.Errorf("read postgres container port: %w", err)
	}
	pg.Host, pg.Port = host, int(port.Num())
	pg.Addr = net.JoinHostPort(host, strconv.Itoa(pg.Port))
	pg.DSN = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", pg.User, containerPassword, pg.Addr, pg.Database)
	if err := runInitSQL(ctx, pg.DSN, spec.InitSQL); err != nil {
		return nil, err
	}
	log.Info("postgres container started", "addr", pg.Addr, "container", pg.ContainerID, "image", spec.Image)
	return pg, nil
}
