package dependencies

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/scenario"
)

// containerPassword is the password of the container's superuser (a
// container cannot use trust auth over its mapped port by default).
const containerPassword = "drill"

// startPostgresContainer runs spec.Image with testcontainers-go's PostgreSQL
// module. The image must be present locally. testcontainers-go also starts
// its Ryuk reaper container unless TESTCONTAINERS_RYUK_DISABLED=true; without
// a registry that image must be present too.
func startPostgresContainer(ctx context.Context, spec scenario.PostgresDep, log *slog.Logger) (_ *Postgres, err error) {
	cli, err := docker.Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("start postgres container: %w", err)
	}
	ok, err := docker.ImagePresentWith(ctx, cli, spec.Image)
	_ = cli.Close()
	if err != nil {
		return nil, fmt.Errorf("start postgres container: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("start postgres container: %w: %s (drill never pulls; load it with docker load "+
			"or build it, or use mode binaries)", docker.ErrImageMissing, spec.Image)
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
