// Package composefile reads a team's Docker Compose file for drill's
// compose environment: it parses the file with the Compose specification's
// own Go library (compose-go), refuses what drill does not carry out
// (naming the file, line and key), and turns the rest into the model that
// internal/compose brings up through the Docker Engine API, with the
// routers and services of Traefik's Docker-provider labels (traefik.go).
// It imports nothing of drill, so the scenario's validation can use it.
package composefile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// ErrUnsupported marks a Compose key or value drill does not carry out.
var ErrUnsupported = errors.New("not supported by drill")

// Project is the part of a Compose project drill brings up.
type Project struct {
	// Name is the Compose project name (containers and the network carry it).
	Name string
	// Dir is the directory relative paths (build contexts) are resolved in.
	Dir string
	// Services in dependency order: a service comes after those it
	// depends_on.
	Services []Service
}

// Service is one Compose service, one container.
type Service struct {
	// Name is the Compose service name; also the container's network alias.
	Name string
	// Image is the image to run; when Build is set it is the tag drill
	// builds (the Compose default "<project>-<service>" when unset).
	Image string
	// Build is the Dockerfile build of the image, nil when the image must be
	// present in the local engine (drill never pulls).
	Build *Build
	// Entrypoint and Command override the image's, nil keeps them.
	Entrypoint, Command []string
	// Env is the container's environment, sorted KEY=VALUE.
	Env []string
	// Labels are the service's labels (the traefik.* ones route).
	Labels map[string]string
	// Health is the healthcheck, nil when the image's own applies.
	Health *Health
	// Restart is the restart policy: "no" (default), always, on-failure,
	// unless-stopped (on-failure[:N] keeps its count).
	Restart string
	// DependsOn names the services this one waits for, with the condition
	// (service_started or service_healthy).
	DependsOn map[string]string
	// CPUs is the container's CPU limit in CPUs (Compose's cpus: a CFS
	// quota), 0 for none.
	CPUs float64
	// Ports are the container ports published on this machine, each on a
	// loopback address (drill's network rule: nothing listens beyond
	// loopback).
	Ports []Port
	// Binds are the bind mounts: only the Docker engine's socket
	// (/var/run/docker.sock), which a Traefik with the Docker provider
	// reads.
	Binds []Bind
	// StopGrace is stop_grace_period: how long the engine waits after
	// SIGTERM before it sends SIGKILL when the container is stopped, in
	// whole seconds (the Engine API's unit); 0 when the file does not set
	// it (the engine's default, [DefaultStopGrace]).
	StopGrace time.Duration
}

// DefaultStopGrace is the Docker engine's stop timeout for a container
// whose configuration sets none: SIGKILL 10 s after SIGTERM.
const DefaultStopGrace = 10 * time.Second

// Grace returns the service's stop grace period: StopGrace, or
// [DefaultStopGrace] when the file sets none.
func (s Service) Grace() time.Duration {
	if s.StopGrace > 0 {
		return s.StopGrace
	}
	return DefaultStopGrace
}

// Port is one published port: the container's TCP port Target on
// HostIP:HostPort of this machine. HostPort 0 lets the engine pick a free
// port (Compose's "127.0.0.1::80"); the started container says which.
type Port struct {
	HostIP   string
	HostPort int
	Target   int
}

// Bind is one bind mount of a host path into the container.
type Bind struct {
	Source, Target string
	ReadOnly       bool
}

// DockerSocket is the engine's socket, the one host path a Compose file
// may bind-mount into a container.
const DockerSocket = "/var/run/docker.sock"

// Build is a Dockerfile build: Context is absolute, Dockerfile relative to
// it (default Dockerfile); Args are build arguments.
type Build struct {
	Context    string
	Dockerfile string
	Args       map[string]*string
}

// Health is a Compose healthcheck in the Engine API's terms. Zero
// durations and Retries mean the engine's defaults (interval 30 s, timeout
// 30 s, retries 3, start period 0, start interval 5 s). Disable turns off
// the image's HEALTHCHECK (test NONE).
type Health struct {
	Test          []string
	Interval      time.Duration
	Timeout       time.Duration
	StartPeriod   time.Duration
	StartInterval time.Duration
	Retries       int
	Disable       bool
}

// supportedServiceKeys are the service keys drill carries out; any other
// key of a service is refused by name.
var supportedServiceKeys = map[string]bool{
	"image": true, "build": true, "command": true, "entrypoint": true,
	"environment": true, "labels": true, "healthcheck": true,
	"restart": true, "depends_on": true, "cpus": true, "ports": true,
	"volumes": true, "stop_grace_period": true,
}

// supportedTopKeys are the top-level keys drill accepts (name only names
// the project; x-* extensions are the file's own anchors).
var supportedTopKeys = map[string]bool{"services": true, "name": true, "version": true}

var supportedBuildKeys = map[string]bool{"context": true, "dockerfile": true, "args": true}

var supportedHealthKeys = map[string]bool{
	"test": true, "interval": true, "timeout": true, "retries": true,
	"start_period": true, "start_interval": true, "disable": true,
}

// Load reads the Compose file at path with compose-go (interpolation from
// env, the specification's schema), names the project project (empty: the
// file's name key, else its directory's name, as docker compose does), and
// refuses every key drill does not carry out with
// "file:line: services.NAME.KEY: ..." (errors wrap [ErrUnsupported]).
// A file compose-go rejects is an error naming the file.
func Load(ctx context.Context, path, project string, env map[string]string) (*Project, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("compose file %s: %w", path, err)
	}
	raw, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("compose file: %w", err)
	}
	if err := checkKeys(abs, raw); err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: raw}},
		Environment: env,
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		if project != "" {
			o.SetProjectName(project, true)
		} else if _, ok := o.GetProjectName(); !ok {
			o.SetProjectName(loader.NormalizeProjectName(filepath.Base(filepath.Dir(abs))), false)
		}
		o.SkipConsistencyCheck = false
		o.ResolvePaths = true
	})
	if err != nil {
		return nil, fmt.Errorf("compose file %s: %w", path, err)
	}
	return fromProject(abs, p)
}

// fromProject turns compose-go's project into drill's model.
func fromProject(file string, p *types.Project) (*Project, error) {
	out := &Project{Name: p.Name, Dir: filepath.Dir(file)}
	names := make([]string, 0, len(p.Services))
	for n := range p.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	byName := map[string]Service{}
	for _, n := range names {
		s := p.Services[n]
		svc := Service{
			Name:       n,
			Image:      s.Image,
			Entrypoint: []string(s.Entrypoint),
			Command:    []string(s.Command),
			Labels:     map[string]string(s.Labels),
			Restart:    s.Restart,
			DependsOn:  map[string]string{},
			CPUs:       float64(s.CPUS),
		}
		if svc.Restart == "" {
			svc.Restart = "no"
		}
		if _, _, err := ParseRestart(svc.Restart); err != nil {
			return nil, fmt.Errorf("%s: services.%s.restart: %w", file, n, err)
		}
		for k, v := range s.Environment {
			if v == nil {
				continue
			}
			svc.Env = append(svc.Env, k+"="+*v)
		}
		sort.Strings(svc.Env)
		if b := s.Build; b != nil {
			df := b.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			svc.Build = &Build{Context: b.Context, Dockerfile: df, Args: map[string]*string(b.Args)}
			if svc.Image == "" {
				svc.Image = p.Name + "-" + n
			}
		}
		if svc.Image == "" {
			return nil, fmt.Errorf("%s: services.%s: neither image nor build is set", file, n)
		}
		if h := s.HealthCheck; h != nil {
			hc := &Health{Test: []string(h.Test), Disable: h.Disable}
			if h.Interval != nil {
				hc.Interval = time.Duration(*h.Interval)
			}
			if h.Timeout != nil {
				hc.Timeout = time.Duration(*h.Timeout)
			}
			if h.StartPeriod != nil {
				hc.StartPeriod = time.Duration(*h.StartPeriod)
			}
			if h.StartInterval != nil {
				hc.StartInterval = time.Duration(*h.StartInterval)
			}
			if h.Retries != nil {
				hc.Retries = int(*h.Retries)
			}
			svc.Health = hc
		}
		if g := s.StopGracePeriod; g != nil {
			d := time.Duration(*g)
			if d <= 0 || d%time.Second != 0 {
				return nil, fmt.Errorf("%s: services.%s.stop_grace_period: %s %w: the engine's stop timeout is a whole number of seconds above 0 (e.g. 10s)", file, n, d, ErrUnsupported)
			}
			svc.StopGrace = d
		}
		for i, pc := range s.Ports {
			port, err := fromPort(pc)
			if err != nil {
				return nil, fmt.Errorf("%s: services.%s.ports[%d]: %w", file, n, i, err)
			}
			svc.Ports = append(svc.Ports, port)
		}
		for i, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind || v.Source != DockerSocket {
				return nil, fmt.Errorf("%s: services.%s.volumes[%d]: %s:%s %w (only a bind mount of %s, for Traefik's Docker provider)", file, n, i, v.Source, v.Target, ErrUnsupported, DockerSocket)
			}
			svc.Binds = append(svc.Binds, Bind{Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly})
		}
		for dep, d := range s.DependsOn {
			cond := d.Condition
			if cond == "" {
				cond = types.ServiceConditionStarted
			}
			switch cond {
			case types.ServiceConditionStarted, types.ServiceConditionHealthy:
			default:
				return nil, fmt.Errorf("%s: services.%s.depends_on.%s.condition: %q %w (service_started, service_healthy)", file, n, dep, cond, ErrUnsupported)
			}
			svc.DependsOn[dep] = cond
		}
		byName[n] = svc
	}
	// Dependency order (compose-go already refused cycles).
	done := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		if done[n] {
			return
		}
		done[n] = true
		deps := make([]string, 0, len(byName[n].DependsOn))
		for d := range byName[n].DependsOn {
			deps = append(deps, d)
		}
		sort.Strings(deps)
		for _, d := range deps {
			visit(d)
		}
		out.Services = append(out.Services, byName[n])
	}
	for _, n := range names {
		visit(n)
	}
	return out, nil
}

// fromPort checks one published port: TCP, a single port, on a loopback
// host address (the engine's default, all addresses, is refused).
func fromPort(pc types.ServicePortConfig) (Port, error) {
	if pc.Protocol != "" && pc.Protocol != "tcp" {
		return Port{}, fmt.Errorf("protocol %s %w (tcp only)", pc.Protocol, ErrUnsupported)
	}
	ip := net.ParseIP(pc.HostIP)
	if ip == nil || !ip.IsLoopback() {
		return Port{}, fmt.Errorf("host address %q %w: publish on loopback only (e.g. \"127.0.0.1::%d\")", pc.HostIP, ErrUnsupported, pc.Target)
	}
	out := Port{HostIP: pc.HostIP, Target: int(pc.Target)}
	if pc.Published != "" {
		n, err := strconv.Atoi(pc.Published)
		if err != nil || n < 0 || n > 65535 {
			return Port{}, fmt.Errorf("published port %q %w (one port, not a range)", pc.Published, ErrUnsupported)
		}
		out.HostPort = n
	}
	return out, nil
}

// ParseRestart splits a Compose restart value into the policy (no,
// always, on-failure, unless-stopped; "" is no) and on-failure's retry
// count (0: no bound). Any other value wraps [ErrUnsupported].
func ParseRestart(s string) (policy string, retries int, err error) {
	policy, count, hasCount := strings.Cut(s, ":")
	switch policy {
	case "":
		return "no", 0, nil
	case "no", "always", "unless-stopped":
		if hasCount {
			break
		}
		return policy, 0, nil
	case "on-failure":
		if !hasCount {
			return policy, 0, nil
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("restart %q: the retry count is not a number", s)
		}
		return policy, n, nil
	}
	return "", 0, fmt.Errorf("restart %q: %w (no, always, on-failure[:N], unless-stopped)", s, ErrUnsupported)
}

// Service returns the service named name.
func (p *Project) Service(name string) (Service, bool) {
	for _, s := range p.Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// checkKeys walks the file's YAML and refuses keys outside drill's subset
// with the line yaml.v3 gives for each.
func checkKeys(file string, raw []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("compose file %s: %w", file, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("compose file %s: the top level is not a mapping", file)
	}
	var errs []error
	refuse := func(n *yaml.Node, path, why string) {
		errs = append(errs, fmt.Errorf("%s:%d: %s: %w (%s)", file, n.Line, path, ErrUnsupported, why))
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if strings.HasPrefix(k.Value, "x-") {
			continue
		}
		if !supportedTopKeys[k.Value] {
			refuse(k, k.Value, "drill supports the top-level keys name and services")
			continue
		}
		if k.Value != "services" || v.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			name, svc := v.Content[j].Value, v.Content[j+1]
			if svc.Kind != yaml.MappingNode {
				continue
			}
			for m := 0; m+1 < len(svc.Content); m += 2 {
				sk, sv := svc.Content[m], svc.Content[m+1]
				p := "services." + name + "." + sk.Value
				if strings.HasPrefix(sk.Value, "x-") {
					continue
				}
				if !supportedServiceKeys[sk.Value] {
					refuse(sk, p, "a service may set "+keyList(supportedServiceKeys))
					continue
				}
				var sub map[string]bool
				switch sk.Value {
				case "build":
					sub = supportedBuildKeys
				case "healthcheck":
					sub = supportedHealthKeys
				}
				if sub == nil || sv.Kind != yaml.MappingNode {
					continue
				}
				for q := 0; q+1 < len(sv.Content); q += 2 {
					if kk := sv.Content[q]; !sub[kk.Value] && !strings.HasPrefix(kk.Value, "x-") {
						refuse(kk, p+"."+kk.Value, sk.Value+" may set "+keyList(sub))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func keyList(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
