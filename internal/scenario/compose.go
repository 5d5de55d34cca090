package scenario

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/drillhq/drill/internal/composefile"
)

// ComposeEnv is environment.compose: the Compose file a compose run brings
// up. Scenario services name Compose services. With Traefik (Traefik set),
// `${services.NAME.url}` is Traefik's entry point as the Compose file
// publishes it on loopback, and drill reads routing from Traefik's API and
// access log; without it, the service's first port the Compose file
// publishes on loopback.
type ComposeEnv struct {
	// File is the Compose file, relative to the scenario; required. It is
	// read with compose-go; keys drill does not carry out are refused.
	File string `yaml:"file" json:"file"`
	// Project is the Compose project name; default: the file's name key,
	// else its directory's name (as docker compose does).
	Project string `yaml:"project,omitempty" json:"project,omitempty"`
	// Env are the variables the Compose file's ${VAR} interpolation reads,
	// after drill fills their ${...} references (e.g.
	// DATABASE_URL: postgres://drill@${proxies.postgres.addr}/drill). A
	// proxy of a compose run listens on the project network's gateway
	// address unless its listen is set, so the containers reach it.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Traefik names the Compose service that runs Traefik in front of the
	// others (ADR 0077); nil when the file runs none.
	Traefik *ComposeTraefik `yaml:"traefik,omitempty" json:"traefik,omitempty"`
	// AllowEmptyServices is Traefik's --providers.docker.allowEmptyServices
	// as the scenario expects it; the Compose file's Traefik command is the
	// truth. Optional, and only with Traefik: when written it must agree
	// with the command (a mismatch is an error naming both).
	AllowEmptyServices bool `yaml:"allowEmptyServices,omitempty" json:"allowEmptyServices,omitempty"`
}

// ComposeTraefik is environment.compose.traefik: the Traefik of the
// Compose file that routes to the services, and what drill reads from it.
// Drill requires of its command (flags, not a file): the Docker provider
// over the engine's socket (a bind mount of /var/run/docker.sock),
// --api.insecure=true (drill polls /api/http/routers and
// /api/http/services on the container's address on the project network),
// --accesslog=true with --accesslog.format=json on standard output and no
// buffering (drill follows the container's log), and the entry point
// published on a loopback address.
type ComposeTraefik struct {
	// Service is the Compose service that runs Traefik; required.
	Service string `yaml:"service" json:"service"`
	// EntryPoint is the entry point the load goes through
	// (--entrypoints.NAME.address); default: the only entry point other
	// than traefik (the API's).
	EntryPoint string `yaml:"entryPoint,omitempty" json:"entryPoint,omitempty"`
}

// TraefikSetup is a compose run's Traefik as the Compose file and
// environment.compose.traefik define it.
type TraefikSetup struct {
	// Service is the Compose service running Traefik.
	Service string
	// EntryPoint is the entry point's name, EntryPort its container port.
	EntryPoint string
	EntryPort  int
	// Static is what drill read of Traefik's command.
	Static *composefile.TraefikStatic
}

// ResolveTraefik checks the Traefik of p against what drill requires
// (ComposeTraefik's doc) and returns its setup; c.Traefik must be set.
// Errors name the key (environment.compose.traefik.* or the Compose
// file's services.NAME.*).
func ResolveTraefik(c *ComposeEnv, p *composefile.Project, allowEmptyWritten bool) (*TraefikSetup, error) {
	t := c.Traefik
	svc, ok := p.Service(t.Service)
	if !ok {
		return nil, fmt.Errorf("environment.compose.traefik.service: no service %q in the Compose file", t.Service)
	}
	st, err := composefile.ParseTraefikStatic(svc)
	if err != nil {
		return nil, err
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !st.DockerProvider {
		bad("services.%s.command: drill needs Traefik's Docker provider (--providers.docker=true)", svc.Name)
	}
	sock := false
	for _, b := range svc.Binds {
		sock = sock || b.Source == composefile.DockerSocket
	}
	if !sock {
		bad("services.%s.volumes: the Docker provider needs the engine's socket (%s:%s:ro)", svc.Name, composefile.DockerSocket, composefile.DockerSocket)
	}
	if st.APIPort == 0 {
		bad("services.%s.command: drill reads routing from Traefik's API: set --api.insecure=true", svc.Name)
	}
	if !st.AccessLogJSON {
		bad("services.%s.command: drill reads every request from Traefik's access log: set --accesslog=true and --accesslog.format=json, without accesslog.filepath (standard output) or accesslog.bufferingsize", svc.Name)
	}
	if allowEmptyWritten && c.AllowEmptyServices != st.AllowEmptyServices {
		bad("environment.compose.allowEmptyServices: %t disagrees with services.%s.command (--providers.docker.allowEmptyServices is %t); the Compose file decides: drop the key or make them agree", c.AllowEmptyServices, svc.Name, st.AllowEmptyServices)
	}
	ep := t.EntryPoint
	if ep == "" {
		var names []string
		for n := range st.EntryPoints {
			if n != "traefik" {
				names = append(names, n)
			}
		}
		if len(names) != 1 {
			sort.Strings(names)
			bad("environment.compose.traefik.entryPoint: name the entry point the load goes through (services.%s.command defines %d besides traefik: %s)", svc.Name, len(names), strings.Join(names, ", "))
		} else {
			ep = names[0]
		}
	}
	port := st.EntryPoints[ep]
	if ep != "" && port == 0 {
		bad("environment.compose.traefik.entryPoint: services.%s.command defines no entry point %q (--entrypoints.%s.address)", svc.Name, ep, ep)
	}
	if port != 0 {
		published := false
		for _, pp := range svc.Ports {
			published = published || pp.Target == port
		}
		if !published {
			bad("services.%s.ports: publish entry point %s's port %d on loopback (e.g. \"127.0.0.1::%d\"): the load goes through it", svc.Name, ep, port, port)
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return &TraefikSetup{Service: svc.Name, EntryPoint: ep, EntryPort: port, Static: st}, nil
}

// ComposePath is the Compose file's path as drill opens it: File relative
// to the scenario's directory.
func (s *Scenario) ComposePath() string {
	c := s.Environment.Compose
	if c == nil || c.File == "" {
		return ""
	}
	if filepath.IsAbs(c.File) || s.File == "" || s.File == "-" {
		return c.File
	}
	return filepath.Join(filepath.Dir(s.File), c.File)
}

var composeVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// composeEnv checks environment.compose and the Compose file itself
// (compose-go, drill's subset, the Traefik labels), and that each scenario
// service names a Compose service.
func (v *validator) composeEnv() {
	e := v.s.Environment
	if e.Kubernetes != nil {
		v.errorf("environment.kubernetes", "applies only to environment type kubernetes")
	}
	if e.Local != nil {
		v.errorf("environment.local", "applies only to environment type local")
	}
	c := e.Compose
	if c == nil || c.File == "" {
		v.errorf("environment", "a compose environment needs environment.compose.file (the Compose file, relative to the scenario)")
		return
	}
	for k := range c.Env {
		if !composeVarRE.MatchString(k) {
			v.errorf("environment.compose.env."+k, "invalid variable name %q", k)
		}
	}
	env := map[string]string{}
	for k, val := range c.Env {
		if x, ok := v.expandSample(val); ok {
			env[k] = x
		}
	}
	p, err := composefile.Load(context.Background(), v.s.ComposePath(), c.Project, env)
	if err != nil {
		v.errorf("environment.compose.file", "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	v.compose = p
	if _, err := composefile.ParseRoutes(p); err != nil {
		v.errorf("environment.compose.file", "%s: %s", v.s.ComposePath(), err)
	}
	_, allowWritten := v.s.Positions["environment.compose.allowEmptyServices"]
	if c.Traefik != nil {
		if c.Traefik.Service == "" {
			v.errorf("environment.compose.traefik.service", "required: the Compose service that runs Traefik")
		} else if _, err := ResolveTraefik(c, p, allowWritten); err != nil {
			v.errorf("environment.compose.traefik", "%s: %s", v.s.ComposePath(), err)
		}
	} else {
		if allowWritten {
			v.errorf("environment.compose.allowEmptyServices", "applies only with environment.compose.traefik: Traefik reads it from its own command (--providers.docker.allowEmptyServices)")
		}
		for _, svc := range p.Services {
			if len(svc.Binds) > 0 {
				v.errorf("environment.compose", "service %s mounts the engine's socket, as a Traefik with the Docker provider does: set environment.compose.traefik.service so drill reads routing from it", svc.Name)
			}
		}
		for i, svc := range v.s.Services {
			if cs, ok := p.Service(svc.Name); ok && len(cs.Ports) == 0 {
				v.errorf(fmt.Sprintf("services[%d].name", i), "%s publishes no port and the Compose file runs no Traefik (environment.compose.traefik): drill has no URL for it", svc.Name)
			}
		}
	}
	for i, svc := range v.s.Services {
		if _, ok := p.Service(svc.Name); !ok {
			names := make([]string, len(p.Services))
			for j, s := range p.Services {
				names[j] = s.Name
			}
			v.errorf(fmt.Sprintf("services[%d].name", i), "no service %q in %s (it has %s)", svc.Name, v.s.ComposePath(), strings.Join(names, ", "))
		}
	}
}

// composeService checks a scenario service of a compose run: only its name
// (the Compose file says the rest).
func (v *validator) composeService(p string, svc *Service) {
	for _, k := range []struct {
		name string
		set  bool
	}{{"reference", svc.Reference != ""}, {"command", len(svc.Command) > 0}, {"build", svc.Build != ""},
		{"args", len(svc.Args) > 0}, {"env", len(svc.Env) > 0}, {"replicas", svc.Replicas != 0},
		{"port", svc.Port != nil}, {"setup", svc.Setup != nil}, {"selector", svc.Selector != ""}, {"url", svc.URL != ""},
		{"manifest", svc.Manifest != nil}, {"resources", svc.Resources != nil}, {"balancing", svc.Balancing != ""}} {
		if k.set {
			v.errorf(p+"."+k.name, "%s does not apply to a compose service: the Compose file defines it", k.name)
		}
	}
}

// composeTarget reports whether f is a container-pause of a Compose
// service in a compose environment: its dependency names a service of the
// Compose file (as composeEnv read it), whose container drill pauses.
func (v *validator) composeTarget(f *Fault) bool {
	if v.s.Environment.Type != EnvCompose || f.Type != FaultContainerPause || v.compose == nil {
		return false // a file that did not load is reported by composeEnv
	}
	_, ok := v.compose.Service(f.Dependency)
	return ok
}

// composePlatformFault checks a pod-kill or rollout of a Compose service
// (faults[i] at p): drill runs each Compose service as one container, so
// a pod-kill chooses at most that one (named <service>-0) and a rollout
// restarts it with no surge; the Traefik drill reads routing from is not
// a target (its access log would end), nor is a service drill reaches on
// a host port the engine picks (a container started again gets another
// one, and ${services.NAME.url} would go stale).
func (v *validator) composePlatformFault(p string, f *Fault) {
	if v.compose == nil {
		return // a file that did not load is reported by composeEnv
	}
	cs, ok := v.compose.Service(f.Service)
	if !ok {
		return // reported by composeEnv
	}
	switch f.Type {
	case FaultPodKill:
		if f.Count != nil && *f.Count > 1 {
			v.errorf(p+".count", "count %d is above the 1 container of Compose service %s: drill runs each Compose service as one container (no scale, no deploy.replicas)", *f.Count, cs.Name)
		}
		for _, pod := range f.Pods {
			if pod != cs.Name+"-0" {
				v.errorf(p+".pods", "no container %q: Compose service %s has one container, %s-0", pod, cs.Name, cs.Name)
			}
		}
	case FaultRollout:
		for _, k := range []struct {
			key string
			set bool
		}{{"maxSurge", f.MaxSurge != nil}, {"maxUnavailable", f.MaxUnavailable != nil}} {
			if k.set {
				v.errorf(p+"."+k.key, "%s does not apply in a compose environment: drill rolls a Compose service one container after another "+
					"(stopped with its grace period, started again, serving before the next), as Compose has no surge", k.key)
			}
		}
	}
	c := v.s.Environment.Compose
	if c.Traefik != nil && c.Traefik.Service == cs.Name {
		v.errorf(p+".service", "%s is the Traefik drill reads routing from (its API and access log): a %s of it would end the access log drill follows; fault the services behind it", cs.Name, f.Type)
		return
	}
	if c.Traefik == nil && len(cs.Ports) > 0 && cs.Ports[0].HostPort == 0 {
		v.errorf(p+".service", "a %s of %s starts its container again, and the engine publishes it on a new host port it picks (%s::%d), so ${services.%s.url} would go stale: "+
			"publish a fixed host port (\"%s:PORT:%d\") or route through Traefik (environment.compose.traefik)",
			f.Type, cs.Name, cs.Ports[0].HostIP, cs.Ports[0].Target, cs.Name, cs.Ports[0].HostIP, cs.Ports[0].Target)
	}
}
