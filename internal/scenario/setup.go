package scenario

import (
	"strings"
)

// PortHandoff says how a local replica learns its TCP port: drill picks a
// free port on 127.0.0.1 per replica, probes it there and routes the
// Service to it, so the program must listen on it. When a replica's
// probes are refused there while its processes listen on other TCP ports,
// drill says so at start ("replica app-0 listens on 127.0.0.1:8080, not on
// its port 127.0.0.1:41234 given in $PORT; ...") and the run stops before
// load (exit 3).
type PortHandoff struct {
	// Env names the environment variable holding the port; default PORT.
	Env string `yaml:"env,omitempty" json:"env,omitempty"`
	// Format is how the value is written: port (default), e.g. 41234;
	// host:port, e.g. 127.0.0.1:41234; or :port, e.g. :41234.
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
}

// Setup is a one-shot step of a local service, like an init container. It
// runs once, after the dependencies, the proxies and the services listed
// before this one are up, and before any replica of this service starts,
// with drill's environment plus the service's env plus its own (no port, no
// REPLICA_INDEX). It must exit 0 within Timeout; its stdout and stderr are
// kept in <out>/logs/<service>-setup.log. A setup that cannot start, exits
// non-zero or times out fails the run (exit 3) before any replica of the
// service starts; everything started is torn down and the error shows the
// last lines of its output.
type Setup struct {
	// Command is argv, run without a shell; required. Expanded like
	// services[].command ($$ writes $).
	Command []string `yaml:"command" json:"command"`
	// Args are appended to Command, expanded alike.
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`
	// Env is added to the service's env for the setup only; values may use
	// ${...}.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Timeout bounds the setup's run, above 0; default 5m.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// How a local replica is handed its port ([PortHandoff]) and its index.
const (
	// DefaultPortEnv is the variable holding the port by default.
	DefaultPortEnv = "PORT"
	// PortFormatPort writes the port alone: 41234 (the default).
	PortFormatPort = "port"
	// PortFormatHostPort writes the loopback address: 127.0.0.1:41234.
	PortFormatHostPort = "host:port"
	// PortFormatColonPort writes the port after a colon: :41234.
	PortFormatColonPort = ":port"
	// ReplicaIndexEnv is the variable holding a replica's 0-based index.
	ReplicaIndexEnv = "REPLICA_INDEX"
)

// PortFormats are the forms [PortHandoff.Format] takes, sorted.
var PortFormats = []string{PortFormatColonPort, PortFormatHostPort, PortFormatPort}

// portHandoff checks services[].port and that services[].env leaves the
// variables drill sets per replica alone.
func (v *validator) portHandoff(p string, svc *Service) {
	name := DefaultPortEnv
	if h := svc.Port; h != nil {
		if h.Env != "" {
			name = h.Env
			switch {
			case !envNameRE.MatchString(h.Env):
				v.errorf(p+".port.env", "%q is not an environment variable name (letters, digits and _, not starting with a digit)", h.Env)
			case h.Env == ReplicaIndexEnv:
				v.errorf(p+".port.env", "%s holds the replica's index; pick another variable for the port", ReplicaIndexEnv)
			}
		}
		if h.Format != "" && !oneOf(h.Format, PortFormats) {
			v.errorf(p+".port.format", "%s", unknownValue("port format", h.Format, PortFormats))
		}
	}
	if _, ok := svc.Env[name]; ok {
		v.errorf(p+".env."+name, "drill sets %s to each replica's port (port.env, default %s); remove it here, or hand the port in another variable with port.env", name, DefaultPortEnv)
	}
	if _, ok := svc.Env[ReplicaIndexEnv]; ok {
		v.errorf(p+".env."+ReplicaIndexEnv, "drill sets %s to each replica's index (0, 1, ...)", ReplicaIndexEnv)
	}
}

// setup checks a service's one-shot setup step.
func (v *validator) setup(p string, st *Setup) {
	if st == nil {
		return
	}
	if len(st.Command) == 0 || strings.TrimSpace(st.Command[0]) == "" {
		v.errorf(p+".command", "setup needs a command (argv, e.g. [./bin/migrate, up])")
	}
	if st.Timeout.D() <= 0 {
		v.errorf(p+".timeout", "timeout must be above 0")
	}
	for k := range st.Env {
		if !envNameRE.MatchString(k) {
			v.errorf(p+".env."+k, "%q is not an environment variable name", k)
		}
	}
}
