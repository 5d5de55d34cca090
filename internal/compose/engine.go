package compose

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/drillhq/drill/internal/composefile"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Labels drill puts on everything it creates for a compose run; `drill
// cleanup` finds containers and networks by LabelRun.
const (
	// LabelRun carries the run id.
	LabelRun = "dev.drill.run"
	// LabelProject carries the Compose project name.
	LabelProject = "com.docker.compose.project"
	// LabelService carries the Compose service name.
	LabelService = "com.docker.compose.service"
)

// Docker is the part of the Engine API client drill uses (the client
// testcontainers-go brings satisfies it).
type Docker interface {
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerStop(ctx context.Context, id string, options client.ContainerStopOptions) (client.ContainerStopResult, error)
	ContainerKill(ctx context.Context, id string, options client.ContainerKillOptions) (client.ContainerKillResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	NetworkCreate(ctx context.Context, name string, options client.NetworkCreateOptions) (client.NetworkCreateResult, error)
	NetworkRemove(ctx context.Context, id string, options client.NetworkRemoveOptions) (client.NetworkRemoveResult, error)
	NetworkList(ctx context.Context, options client.NetworkListOptions) (client.NetworkListResult, error)
	NetworkInspect(ctx context.Context, id string, options client.NetworkInspectOptions) (client.NetworkInspectResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)
	ImageInspect(ctx context.Context, image string, options ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageRemove(ctx context.Context, image string, options client.ImageRemoveOptions) (client.ImageRemoveResult, error)
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
	ServerVersion(ctx context.Context, options client.ServerVersionOptions) (client.ServerVersionResult, error)
}

// StartIntervalAPI is the first Engine API version that carries out a
// healthcheck's start_interval (Docker Engine 25); older engines accept the
// field and ignore it, checking every interval during start_period too.
const StartIntervalAPI = "1.44"

// Container is one started container of a stack.
type Container struct {
	// Service is the Compose service; Name the container's name
	// (drill-<run>-<service>); ID the engine's id.
	Service, Name, ID string
	// IP is the container's address on the project network, reachable from
	// this machine.
	IP string
	// HasHealth says the container has a healthcheck (its own or its
	// image's).
	HasHealth bool
	// Published maps a container port the Compose file publishes to the
	// loopback host:port the engine bound it to (a host port 0 in the file
	// is the one the engine picked).
	Published map[int]string
}

// Stack is a project brought up for one run: its network and containers.
type Stack struct {
	cli     Docker
	log     *slog.Logger
	run     string
	Project *composefile.Project
	// Network is the project network's name, NetworkID its id.
	Network, NetworkID string
	// Gateway is the network's IPv4 gateway address: this machine on that
	// network, where containers reach drill's proxies.
	Gateway string
	// Containers in start order.
	Containers []*Container
	// EngineAPI is the engine's highest API version ("1.41"); empty when
	// the engine did not say.
	EngineAPI string
	// Warnings are what the engine will not carry out of the Compose file
	// as written (a start_interval on an engine below API 1.44), one
	// sentence each naming the file's key.
	Warnings []string
}

// Names returns the names drill gives the run's network and a service's
// container: drill-<run>-<project> and drill-<run>-<service>.
func Names(run, project, service string) (networkName, containerName string) {
	base := "drill-" + strings.ToLower(run)
	return base + "-" + project, base + "-" + service
}

// Up is [CreateNetwork] then [Stack.Start]; on error everything created so
// far is removed.
func Up(ctx context.Context, cli Docker, p *composefile.Project, run string, journal func() error, log *slog.Logger) (*Stack, error) {
	st, err := CreateNetwork(ctx, cli, p.Name, run, journal, log)
	if err != nil {
		return nil, err
	}
	if err := st.Start(ctx, p); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := st.Down(dctx); derr != nil {
			st.log.Warn("could not remove a compose project that failed to start", "err", derr)
		}
		return nil, err
	}
	return st, nil
}

// CreateNetwork creates the run's project network (a bridge named
// drill-<run>-<project>, labelled with run) and returns the stack that
// will hold its containers. journal is called before anything is created,
// so `drill cleanup` finds what a killed run left even if drill dies
// mid-way.
func CreateNetwork(ctx context.Context, cli Docker, project, run string, journal func() error, log *slog.Logger) (*Stack, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := &Stack{cli: cli, log: log, run: run, Project: &composefile.Project{Name: project}}
	if journal != nil {
		if err := journal(); err != nil {
			return nil, fmt.Errorf("journal the compose project %s: %w", project, err)
		}
	}
	netName, _ := Names(run, project, "")
	st.Network = netName
	nc, err := cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: map[string]string{LabelRun: run, LabelProject: project},
	})
	if err != nil {
		return nil, fmt.Errorf("create network %s: %w", netName, err)
	}
	st.NetworkID = nc.ID
	if v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{}); err == nil {
		st.EngineAPI = v.APIVersion
	} else {
		log.Warn("could not read the engine's API version", "err", err)
	}
	ni, err := cli.NetworkInspect(ctx, nc.ID, client.NetworkInspectOptions{})
	if err == nil {
		for _, c := range ni.Network.IPAM.Config {
			if c.Gateway.IsValid() && c.Gateway.Is4() {
				st.Gateway = c.Gateway.String()
				break
			}
		}
	}
	if st.Gateway == "" {
		_ = st.Down(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("network %s has no IPv4 gateway (inspect: %v)", netName, err)
	}
	return st, nil
}

// Start creates and starts the containers of p on the stack's network in
// dependency order; a service that depends_on another with condition
// service_healthy starts once that one is healthy (bounded by ctx); one
// without a healthcheck (its own or its image's) is an error, as in docker
// compose.
// Images must be in the local engine ([BuildImages] makes those with a
// build section). Containers created before an error stay listed for
// [Stack.Down].
func (st *Stack) Start(ctx context.Context, p *composefile.Project) error {
	st.Project = p
	for _, s := range p.Services {
		for dep, cond := range s.DependsOn {
			if cond != "service_healthy" {
				continue
			}
			c := st.container(dep)
			if c == nil {
				return fmt.Errorf("service %s depends on %s, which is not in the project", s.Name, dep)
			}
			if !c.HasHealth {
				// docker compose fails the same way; running is not healthy.
				return fmt.Errorf("service %s depends on %s with condition service_healthy, but container %s has no healthcheck configured", s.Name, dep, c.Name)
			}
			if err := st.WaitHealthy(ctx, c); err != nil {
				return fmt.Errorf("service %s waits for %s: %w", s.Name, dep, err)
			}
		}
		if err := st.start(ctx, s); err != nil {
			return fmt.Errorf("start service %s: %w", s.Name, err)
		}
	}
	return nil
}

func (st *Stack) container(service string) *Container {
	for _, c := range st.Containers {
		if c.Service == service {
			return c
		}
	}
	return nil
}

// Container returns the container of service, nil when there is none.
func (st *Stack) Container(service string) *Container { return st.container(service) }

// start creates and starts s's container, listed in st.Containers from
// its creation on, so [Stack.Down] removes it whatever fails after.
func (st *Stack) start(ctx context.Context, s composefile.Service) error {
	if _, err := st.cli.ImageInspect(ctx, s.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("image %s is not in the local engine and drill never pulls: build it first (a build section, or docker build -t %s)", s.Image, s.Image)
		}
		return fmt.Errorf("inspect image %s: %w", s.Image, err)
	}
	_, name := Names(st.run, st.Project.Name, s.Name)
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[LabelRun] = st.run
	labels[LabelProject] = st.Project.Name
	labels[LabelService] = s.Name
	cfg := &container.Config{
		Image:      s.Image,
		Env:        s.Env,
		Labels:     labels,
		Entrypoint: s.Entrypoint,
		Cmd:        s.Command,
		Hostname:   s.Name,
	}
	if s.StopGrace > 0 {
		// The engine's stop timeout, in seconds: docker stop (and drill's
		// pod-kill and rollout) wait this long after SIGTERM.
		secs := int(s.StopGrace / time.Second)
		cfg.StopTimeout = &secs
	}
	if h := s.Health; h != nil {
		hc := &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, StartInterval: h.StartInterval, Retries: h.Retries}
		if h.Disable {
			hc = &container.HealthConfig{Test: []string{"NONE"}}
		}
		cfg.Healthcheck = hc
		if w := startIntervalIgnored(st.EngineAPI, s.Name, h); w != "" {
			st.Warnings = append(st.Warnings, w)
			st.log.Warn(w)
		}
	}
	rp, err := restartPolicy(s.Restart)
	if err != nil {
		return err
	}
	hostCfg := &container.HostConfig{RestartPolicy: rp, NetworkMode: container.NetworkMode(st.Network),
		Resources: container.Resources{NanoCPUs: int64(s.CPUs * 1e9)}}
	if err := publish(cfg, hostCfg, s); err != nil {
		return err
	}
	res, err := st.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     cfg,
		HostConfig: hostCfg,
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			st.Network: {Aliases: []string{s.Name}},
		}},
	})
	if err != nil {
		return fmt.Errorf("create container %s: %w", name, err)
	}
	c := &Container{Service: s.Name, Name: name, ID: res.ID}
	st.Containers = append(st.Containers, c)
	if _, err := st.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container %s: %w", name, err)
	}
	in, err := st.cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", name, err)
	}
	if ns := in.Container.NetworkSettings; ns != nil {
		if ep := ns.Networks[st.Network]; ep != nil && ep.IPAddress.IsValid() {
			c.IP = ep.IPAddress.String()
		}
	}
	if c.IP == "" {
		return fmt.Errorf("container %s has no address on network %s", name, st.Network)
	}
	if len(s.Ports) > 0 {
		c.Published = map[int]string{}
		var ports network.PortMap
		if ns := in.Container.NetworkSettings; ns != nil {
			ports = ns.Ports
		}
		for _, pp := range s.Ports {
			port, _ := network.PortFrom(uint16(pp.Target), network.TCP)
			for _, b := range ports[port] {
				if b.HostIP.IsLoopback() && b.HostPort != "" {
					c.Published[pp.Target] = net.JoinHostPort(b.HostIP.String(), b.HostPort)
					break
				}
			}
			if c.Published[pp.Target] == "" {
				return fmt.Errorf("container %s: the engine did not publish port %d on %s", name, pp.Target, pp.HostIP)
			}
		}
	}
	// The configuration (the image's HEALTHCHECK merged in) says it, as
	// docker compose reads it: the health state may come a moment later.
	hc := in.Container.Config
	c.HasHealth = in.Container.State != nil && in.Container.State.Health != nil ||
		hc != nil && hc.Healthcheck != nil && len(hc.Healthcheck.Test) > 0 && hc.Healthcheck.Test[0] != "NONE"
	st.log.Info("container started", "service", s.Name, "container", name, "ip", c.IP, "healthcheck", c.HasHealth)
	return nil
}

// publish adds s's published ports (each on its loopback address) and
// bind mounts to the container's configuration.
func publish(cfg *container.Config, hc *container.HostConfig, s composefile.Service) error {
	for _, pp := range s.Ports {
		port, ok := network.PortFrom(uint16(pp.Target), network.TCP)
		ip, err := netip.ParseAddr(pp.HostIP)
		if !ok || err != nil || !ip.IsLoopback() {
			return fmt.Errorf("services.%s.ports: %s:%d:%d is not a TCP port on a loopback address", s.Name, pp.HostIP, pp.HostPort, pp.Target)
		}
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = network.PortSet{}
			hc.PortBindings = network.PortMap{}
		}
		cfg.ExposedPorts[port] = struct{}{}
		hostPort := ""
		if pp.HostPort != 0 {
			hostPort = strconv.Itoa(pp.HostPort)
		}
		hc.PortBindings[port] = append(hc.PortBindings[port], network.PortBinding{HostIP: ip, HostPort: hostPort})
	}
	for _, b := range s.Binds {
		if b.Source != composefile.DockerSocket {
			return fmt.Errorf("services.%s.volumes: %s: only %s may be bind-mounted", s.Name, b.Source, composefile.DockerSocket)
		}
		bind := b.Source + ":" + b.Target
		if b.ReadOnly {
			bind += ":ro"
		}
		hc.Binds = append(hc.Binds, bind)
	}
	return nil
}

// startIntervalIgnored returns the warning for a healthcheck whose
// start_interval the engine of API version api ignores, "" when it
// carries it out (or the healthcheck sets none, or is disabled). An
// unknown version warns too: drill cannot tell.
func startIntervalIgnored(api, service string, h *composefile.Health) string {
	if h == nil || h.Disable || h.StartInterval <= 0 {
		return ""
	}
	if api != "" && !versionBelow(api, StartIntervalAPI) {
		return ""
	}
	engine := "an engine of unknown API version"
	if api != "" {
		engine = "this engine (API " + api + ")"
	}
	interval := h.Interval
	if interval <= 0 {
		interval = 30 * time.Second // the engine's default
	}
	return fmt.Sprintf("services.%s.healthcheck.start_interval: %s is ignored by %s: start_interval needs API %s, so during start_period (%s) the engine checks every interval (%s) instead",
		service, h.StartInterval, engine, StartIntervalAPI, h.StartPeriod, interval)
}

// versionBelow reports whether the API version a ("1.41") is below b.
// A part that is not a number compares as 0.
func versionBelow(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// restartPolicy maps Compose's restart value to the engine's policy.
func restartPolicy(s string) (container.RestartPolicy, error) {
	name, retries, err := composefile.ParseRestart(s)
	if err != nil {
		return container.RestartPolicy{}, err
	}
	switch name {
	case "always":
		return container.RestartPolicy{Name: container.RestartPolicyAlways}, nil
	case "unless-stopped":
		return container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}, nil
	case "on-failure":
		return container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: retries}, nil
	}
	return container.RestartPolicy{Name: container.RestartPolicyDisabled}, nil
}

// WaitHealthy waits until c's health status is healthy (or, without a
// healthcheck, until it runs). A container that exited and will not be
// restarted, or turned unhealthy, is an error at once: `docker compose up
// --wait` fails the same way.
func (st *Stack) WaitHealthy(ctx context.Context, c *Container) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		in, err := st.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect %s: %w", c.Name, err)
		}
		s := in.Container.State
		switch {
		case s == nil:
		case s.Health == nil && s.Running:
			return nil
		case s.Health != nil && s.Health.Status == container.Healthy:
			return nil
		case s.Health != nil && s.Health.Status == container.Unhealthy:
			return fmt.Errorf("%s is unhealthy (%s)", c.Name, lastOutputs(s.Health, 2))
		case s.Status == container.StateExited || s.Status == container.StateDead:
			if !s.Restarting {
				return fmt.Errorf("%s exited with code %d", c.Name, s.ExitCode)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy: %w", c.Name, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// lastOutputs joins the outputs of the last n health checks.
func lastOutputs(h *container.Health, n int) string {
	var out []string
	for i := max(0, len(h.Log)-n); i < len(h.Log); i++ {
		l := h.Log[i]
		out = append(out, fmt.Sprintf("exit %d: %s", l.ExitCode, strings.TrimSpace(l.Output)))
	}
	return strings.Join(out, "; ")
}

// Down removes the stack's containers (forced, their anonymous volumes
// too) and its network. Containers already gone count as removed.
func (st *Stack) Down(ctx context.Context) error {
	var errs []error
	for i := len(st.Containers) - 1; i >= 0; i-- {
		c := st.Containers[i]
		if _, err := st.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.Name, err))
		}
	}
	st.Containers = nil
	if st.NetworkID != "" {
		if _, err := st.cli.NetworkRemove(ctx, st.NetworkID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", st.Network, err))
		} else {
			st.NetworkID = ""
		}
	}
	return errors.Join(errs...)
}

// RemoveRun removes every container and network labelled with run (every
// drill run's when run is ""): what a killed run left. It returns what it
// removed ("container NAME", "network NAME").
func RemoveRun(ctx context.Context, cli Docker, run string) ([]string, error) {
	f := client.Filters{}
	if run == "" {
		f = f.Add("label", LabelRun)
	} else {
		f = f.Add("label", LabelRun+"="+run)
	}
	var done []string
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers of run %s: %w", run, err)
	}
	for _, c := range cs.Items {
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", name, err))
			continue
		}
		done = append(done, "container "+name)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return done, errors.Join(append(errs, fmt.Errorf("list networks of run %s: %w", run, err))...)
	}
	for _, n := range ns.Items {
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			continue
		}
		done = append(done, "network "+n.Name)
	}
	return done, errors.Join(errs...)
}

// BuildImages builds the image of every service of p with a build section
// through the Engine API (the context sent as a tar stream), tagged with
// the service's image name. The build's own error message is returned.
func BuildImages(ctx context.Context, cli Docker, p *composefile.Project, log *slog.Logger) error {
	for _, s := range p.Services {
		if s.Build == nil {
			continue
		}
		if err := BuildImage(ctx, cli, s.Build.Context, s.Build.Dockerfile, s.Image, s.Build.Args); err != nil {
			return fmt.Errorf("build image of service %s: %w", s.Name, err)
		}
		if log != nil {
			log.Info("image built", "service", s.Name, "image", s.Image)
		}
	}
	return nil
}

// BuildImage builds dir (its Dockerfile at dockerfile, relative to dir)
// into tag. The image tag named before, left without a name by the new
// build, is removed (unless a container still uses it), so rebuilding
// does not pile up dangling images.
func BuildImage(ctx context.Context, cli Docker, dir, dockerfile, tag string, args map[string]*string) error {
	var old string
	if in, err := cli.ImageInspect(ctx, tag); err == nil {
		old = in.ID
	}
	if err := buildImage(ctx, cli, dir, dockerfile, tag, args); err != nil {
		return err
	}
	if in, err := cli.ImageInspect(ctx, tag); err == nil && old != "" && in.ID != old {
		_, _ = cli.ImageRemove(ctx, old, client.ImageRemoveOptions{})
	}
	return nil
}

func buildImage(ctx context.Context, cli Docker, dir, dockerfile, tag string, args map[string]*string) error {
	var buf bytes.Buffer
	if err := tarDir(&buf, dir); err != nil {
		return fmt.Errorf("pack build context %s: %w", dir, err)
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: dockerfile, Remove: true, ForceRemove: true, BuildArgs: args,
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.Error != "" {
			return fmt.Errorf("build %s: %s", tag, strings.TrimSpace(msg.Error))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("build %s: read the engine's output: %w", tag, err)
	}
	return nil
}

// tarDir writes dir's regular files and directories as a tar stream.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
