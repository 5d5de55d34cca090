package scenario

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/drillhq/drill/internal/composefile"
)

// ComposeEnv is environment.compose: the Compose file a compose run brings
// up. Scenario services name Compose services; `${services.NAME.url}` is
// drill's Traefik-rule gateway in front of them.
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
	// AllowEmptyServices is Traefik's --providers.docker.allowEmptyServices:
	// a router whose containers are all unhealthy stays and answers 503
	// instead of vanishing (404). Default false, as Traefik's.
	AllowEmptyServices bool `yaml:"allowEmptyServices,omitempty" json:"allowEmptyServices,omitempty"`
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
