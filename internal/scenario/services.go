package scenario

import (
	"fmt"
	"strings"
)

// Service is a system under test.
// In a local environment exactly one of Reference or Command is set.
type Service struct {
	// Name is referenced as ${services.<name>.url} (the local Service proxy).
	Name string `yaml:"name" json:"name"`
	// Reference names a built-in reference service: order-gateway or payment-core.
	Reference string `yaml:"reference,omitempty" json:"reference,omitempty"`
	// Build selects the reference build: correct (default) or naive.
	Build string `yaml:"build,omitempty" json:"build,omitempty"`
	// Command is argv of any local program, run without a shell; the
	// replica's port is in $PORT (see port). Like every string value it is
	// expanded: ${...} references are filled and $$ writes a literal $, so
	// [sh, -c, "exec app --listen :$$PORT"] lets the shell read $PORT.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// Args are extra arguments (appended to Command or the reference
	// service), expanded like Command.
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`
	// Env is added to each replica's environment; values may use ${...}.
	// It may not set the port variable (port.env) or REPLICA_INDEX: drill
	// sets those for each replica.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Replicas is the number of local processes; default 1. Replica i
	// (pod <name>-<i>) gets i, 0-based, in $REPLICA_INDEX, the same across
	// its restarts (like a StatefulSet ordinal), so that one replica alone
	// can do once-only work.
	Replicas int `yaml:"replicas,omitempty" json:"replicas,omitempty"`
	// Port says in which environment variable and form each replica is
	// handed its port. Default: $PORT holding the port number.
	Port *PortHandoff `yaml:"port,omitempty" json:"port,omitempty"`
	// Setup is a one-shot step (migrations, seeding) run once before the
	// service's replicas start; it must exit 0.
	Setup *Setup `yaml:"setup,omitempty" json:"setup,omitempty"`
	// Listen is the local Service proxy's address; default 127.0.0.1:0.
	Listen string `yaml:"listen,omitempty" json:"listen,omitempty"`
	// Balancing is how the local Service spreads traffic over the ready
	// replicas: request (default) balances every HTTP request, as an
	// ingress, a cloud load balancer in IP mode or a mesh does, so an
	// unready replica gets no further request even on a kept-alive
	// connection; connection balances each TCP connection when it opens
	// and leaves it with its replica, as kube-proxy does, so kept-alive
	// connections keep reaching a replica after it went unready, and with
	// no ready replica new connections are refused. Local environment only.
	Balancing Balancing `yaml:"balancing,omitempty" json:"balancing,omitempty"`
	// Probes are the container's probes, inline. Overrides Manifest per probe.
	Probes Probes `yaml:"probes,omitempty" json:"probes,omitempty"`
	// Manifest reads probes and resources.limits.cpu from a Deployment
	// manifest.
	Manifest *ManifestRef `yaml:"manifest,omitempty" json:"manifest,omitempty"`
	// TerminationGracePeriodSeconds is the SIGTERM->SIGKILL grace in s; default 30.
	TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds,omitempty" json:"terminationGracePeriodSeconds,omitempty"`
	// Lifecycle is the container's lifecycle hooks, as a Deployment
	// writes them; overrides Manifest's. Local environment: a preStop
	// sleep runs before SIGTERM whenever the runtime ends a container (a
	// deleted pod, a rollout, a failed liveness or startup probe), within
	// the grace period; not when drill itself stops the service.
	Lifecycle *Lifecycle `yaml:"lifecycle,omitempty" json:"lifecycle,omitempty"`
	// Resources are the container's resources, as a Deployment writes them;
	// overrides Manifest's. Only limits.cpu is applied (local environment).
	Resources *Resources `yaml:"resources,omitempty" json:"resources,omitempty"`
	// Selector finds the service's pods in kubernetes mode (e.g. app=order-gateway).
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
	// URL is the service's base URL in kubernetes mode.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
}

// Lifecycle is a container's lifecycle hooks (core/v1 Lifecycle); only a
// preStop sleep is supported.
type Lifecycle struct {
	// PreStop runs before the container gets SIGTERM, within its grace period.
	PreStop *LifecycleHandler `yaml:"preStop,omitempty" json:"preStop,omitempty"`
}

// LifecycleHandler is one lifecycle hook; only sleep is supported.
type LifecycleHandler struct {
	// Sleep pauses the termination for a while before SIGTERM; required.
	Sleep *SleepAction `yaml:"sleep,omitempty" json:"sleep,omitempty"`
}

// SleepAction is a hook that sleeps (core/v1 SleepAction).
type SleepAction struct {
	// Seconds is how long to sleep, in s: above 0 and below the service's
	// terminationGracePeriodSeconds.
	Seconds int64 `yaml:"seconds" json:"seconds"`
}

// PreStopSleep is the service's preStop sleep in s (0 when it has none).
func (s Service) PreStopSleep() int64 {
	if s.Lifecycle == nil || s.Lifecycle.PreStop == nil || s.Lifecycle.PreStop.Sleep == nil {
		return 0
	}
	return s.Lifecycle.PreStop.Sleep.Seconds
}

// CPULimit is the service's resources.limits.cpu (0 when none is given).
func (s Service) CPULimit() CPUQuantity {
	if s.Resources == nil || s.Resources.Limits == nil {
		return 0
	}
	return s.Resources.Limits.CPU
}

// Balancing is how a local Service spreads traffic over its ready
// replicas ([Service.Balancing]).
type Balancing string

// Balancings of a local Service.
const (
	// BalancingRequest balances every HTTP request (L7; the default).
	BalancingRequest Balancing = "request"
	// BalancingConnection balances each TCP connection (L4, kube-proxy).
	BalancingConnection Balancing = "connection"
)

// Resources are a container's resources; drill reads only limits.cpu.
type Resources struct {
	// Limits are the container's resource limits.
	Limits *ResourceLimits `yaml:"limits,omitempty" json:"limits,omitempty"`
}

// ResourceLimits are a container's resource limits.
type ResourceLimits struct {
	// CPU caps each local replica of the service at this much CPU (500m is
	// half a core) with a CFS quota over a 100 ms period, as the kubelet
	// does (cpu.cfs_quota_us on cgroup v1, cpu.max on v2). Where drill may
	// not create cgroups the limit is not applied and the run says so in
	// its validity warnings.
	CPU CPUQuantity `yaml:"cpu,omitempty" json:"cpu,omitempty"`
}

// ManifestRef points at a Deployment manifest (YAML, one or more documents);
// drill reads the probes of the named container.
type ManifestRef struct {
	// Path is relative to the scenario file.
	Path string `yaml:"path" json:"path"`
	// Container is the container name; default: the only container.
	Container string `yaml:"container,omitempty" json:"container,omitempty"`
}

// Probes are a container's three probes with PodSpec field names.
type Probes struct {
	// StartupProbe gates liveness and readiness until it first passes.
	StartupProbe *Probe `yaml:"startupProbe,omitempty" json:"startupProbe,omitempty"`
	// LivenessProbe restarts the container after failureThreshold failures in a row.
	LivenessProbe *Probe `yaml:"livenessProbe,omitempty" json:"livenessProbe,omitempty"`
	// ReadinessProbe takes the replica out of routing after failureThreshold
	// failures in a row and back after successThreshold successes.
	ReadinessProbe *Probe `yaml:"readinessProbe,omitempty" json:"readinessProbe,omitempty"`
}

// Probe mirrors the Kubernetes core/v1 Probe with the same field names and
// defaults: initialDelaySeconds 0, periodSeconds 10, timeoutSeconds 1,
// successThreshold 1, failureThreshold 3. Exactly one handler is set.
// Kubernetes' rule: liveness and startup successThreshold must be 1.
type Probe struct {
	// HTTPGet probes with an HTTP GET; 200-399 passes.
	HTTPGet *HTTPGetAction `yaml:"httpGet,omitempty" json:"httpGet,omitempty"`
	// TCPSocket probes by opening a TCP connection.
	TCPSocket *TCPSocketAction `yaml:"tcpSocket,omitempty" json:"tcpSocket,omitempty"`
	// Exec probes by running a command; exit status 0 passes.
	Exec *ExecAction `yaml:"exec,omitempty" json:"exec,omitempty"`
	// InitialDelaySeconds in s; default 0.
	InitialDelaySeconds int32 `yaml:"initialDelaySeconds,omitempty" json:"initialDelaySeconds,omitempty"`
	// PeriodSeconds in s; default 10, minimum 1.
	PeriodSeconds int32 `yaml:"periodSeconds,omitempty" json:"periodSeconds,omitempty"`
	// TimeoutSeconds in s; default 1, minimum 1.
	TimeoutSeconds int32 `yaml:"timeoutSeconds,omitempty" json:"timeoutSeconds,omitempty"`
	// SuccessThreshold: consecutive successes to pass; default 1.
	SuccessThreshold int32 `yaml:"successThreshold,omitempty" json:"successThreshold,omitempty"`
	// FailureThreshold: consecutive failures to fail; default 3.
	FailureThreshold int32 `yaml:"failureThreshold,omitempty" json:"failureThreshold,omitempty"`
	// TerminationGracePeriodSeconds overrides the service's grace for
	// liveness/startup kills, in s.
	TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds,omitempty" json:"terminationGracePeriodSeconds,omitempty"`
}

// HTTPGetAction probes GET http://127.0.0.1:<replica port><Path>; 200-399 passes.
type HTTPGetAction struct {
	// Path is the request path, starting with /; required.
	Path string `yaml:"path" json:"path"`
	// Port is ignored locally (the replica's own port is used); kept for
	// manifest compatibility. Number or name.
	Port any `yaml:"port,omitempty" json:"port,omitempty"`
	// Scheme is HTTP (default) or HTTPS.
	Scheme string `yaml:"scheme,omitempty" json:"scheme,omitempty"`
	// HTTPHeaders are sent with each probe request.
	HTTPHeaders []HTTPHeader `yaml:"httpHeaders,omitempty" json:"httpHeaders,omitempty"`
}

// HTTPHeader is one probe request header.
type HTTPHeader struct {
	// Name is the header name; required.
	Name string `yaml:"name" json:"name"`
	// Value is the header value; required.
	Value string `yaml:"value" json:"value"`
}

// TCPSocketAction passes when a TCP connection to the replica's port opens.
type TCPSocketAction struct {
	// Port is ignored locally (the replica's own port is used); number or name.
	Port any `yaml:"port,omitempty" json:"port,omitempty"`
}

// ExecAction runs Command; exit status 0 passes.
type ExecAction struct {
	// Command is argv, run without a shell; required.
	Command []string `yaml:"command" json:"command"`
}

// Reference service names and builds (docs/DESIGN.md §17).
var (
	ReferenceServices = []string{"order-gateway", "payment-core"}
	Builds            = []string{"correct", "naive"}
	Balancings        = []string{string(BalancingRequest), string(BalancingConnection)}
)

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	HTTPSchemes = []string{"HTTP", "HTTPS"}
)

func (v *validator) services() {
	s := v.s
	names := make([]string, len(s.Services))
	for i, svc := range s.Services {
		names[i] = svc.Name
	}
	v.unique("service", names, func(i int) string { return fmt.Sprintf("services[%d]", i) })
	for i := range s.Services {
		svc := &s.Services[i]
		p := fmt.Sprintf("services[%d]", i)
		if s.Environment.Type == EnvLocal {
			switch {
			case svc.Reference == "" && len(svc.Command) == 0:
				v.errorf(p, "a local service needs reference (%s) or command", strings.Join(ReferenceServices, " or "))
			case svc.Reference != "" && len(svc.Command) > 0:
				v.errorf(p+".command", "set reference or command, not both")
			}
			if svc.Reference != "" && !oneOf(svc.Reference, ReferenceServices) {
				v.errorf(p+".reference", "%s", unknownValue("reference service", svc.Reference, ReferenceServices))
			}
			if svc.Build != "" && svc.Reference == "" {
				v.errorf(p+".build", "build applies only to a reference service")
			} else if svc.Build != "" && !oneOf(svc.Build, Builds) {
				v.errorf(p+".build", "%s", unknownValue("build", svc.Build, Builds))
			}
			if svc.Replicas < 1 || svc.Replicas > 64 {
				v.errorf(p+".replicas", "replicas must be between 1 and 64, got %d", svc.Replicas)
			}
			v.checkHostPort(p+".listen", svc.Listen)
			if svc.Balancing != "" && !oneOf(string(svc.Balancing), Balancings) {
				v.errorf(p+".balancing", "%s", unknownValue("balancing", string(svc.Balancing), Balancings))
			}
			if svc.Selector != "" {
				v.errorf(p+".selector", "selector applies only to environment type kubernetes")
			}
			if svc.URL != "" {
				v.errorf(p+".url", "url applies only to environment type kubernetes (locally use ${services.%s.url})", svc.Name)
			}
			for j, c := range svc.Command {
				if j == 0 && strings.TrimSpace(c) == "" {
					v.errorf(fmt.Sprintf("%s.command[0]", p), "the program name is empty")
				}
			}
			v.portHandoff(p, svc)
			v.setup(p+".setup", svc.Setup)
		} else if s.Environment.Type == EnvCompose {
			v.composeService(p, svc)
		} else {
			if svc.Selector == "" {
				v.errorf(p, "a kubernetes service needs selector (e.g. app=order-gateway)")
			}
			for _, k := range []struct {
				name string
				set  bool
			}{{"reference", svc.Reference != ""}, {"command", len(svc.Command) > 0}, {"build", svc.Build != ""},
				{"args", len(svc.Args) > 0}, {"env", len(svc.Env) > 0}, {"replicas", svc.Replicas != 0}, {"listen", svc.Listen != ""},
				{"port", svc.Port != nil}, {"setup", svc.Setup != nil}, {"balancing", svc.Balancing != ""}} {
				if k.set {
					v.errorf(p+"."+k.name, "%s applies only to environment type local", k.name)
				}
			}
			if svc.URL != "" {
				v.checkURL(p+".url", svc.URL)
			}
		}
		if g := svc.TerminationGracePeriodSeconds; g != nil && *g < 0 {
			v.errorf(p+".terminationGracePeriodSeconds", "must not be negative")
		}
		v.lifecycle(p, *svc)
		v.probe(p+".probes.startupProbe", "startup", svc.Probes.StartupProbe)
		v.probe(p+".probes.livenessProbe", "liveness", svc.Probes.LivenessProbe)
		v.probe(p+".probes.readinessProbe", "readiness", svc.Probes.ReadinessProbe)
	}
}

// lifecycle checks a service's lifecycle hooks by Kubernetes' rules: a
// preStop hook needs its sleep, whose seconds are above 0 and below the
// grace period (the API server refuses a sleep the grace would cut).
func (v *validator) lifecycle(p string, svc Service) {
	lc := svc.Lifecycle
	if lc == nil || lc.PreStop == nil {
		return
	}
	if v.s.Environment.Type != EnvLocal {
		v.errorf(p+".lifecycle", "lifecycle applies only to environment type local (the cluster's manifest has its own)")
	}
	if lc.PreStop.Sleep == nil {
		v.errorf(p+".lifecycle.preStop", "a preStop hook needs sleep (the one kind of hook drill runs)")
		return
	}
	sec := lc.PreStop.Sleep.Seconds
	grace := DefaultGracePeriod
	if svc.TerminationGracePeriodSeconds != nil {
		grace = *svc.TerminationGracePeriodSeconds
	}
	switch {
	case sec <= 0:
		v.errorf(p+".lifecycle.preStop.sleep.seconds", "must be above 0, got %d", sec)
	case sec >= grace:
		v.errorf(p+".lifecycle.preStop.sleep.seconds", "must be below terminationGracePeriodSeconds (%d), got %d", grace, sec)
	}
}

// probe checks Kubernetes' own rules for a container probe.
func (v *validator) probe(p, kind string, pr *Probe) {
	if pr == nil {
		return
	}
	handlers := 0
	for _, set := range []bool{pr.HTTPGet != nil, pr.TCPSocket != nil, pr.Exec != nil} {
		if set {
			handlers++
		}
	}
	if handlers != 1 {
		v.errorf(p, "a probe needs exactly one handler of httpGet, tcpSocket or exec (has %d)", handlers)
	}
	if h := pr.HTTPGet; h != nil {
		if !strings.HasPrefix(h.Path, "/") {
			v.errorf(p+".httpGet.path", "path must start with /, got %q", h.Path)
		}
		if !oneOf(h.Scheme, HTTPSchemes) {
			v.errorf(p+".httpGet.scheme", "%s", unknownValue("scheme", h.Scheme, HTTPSchemes))
		}
		v.checkPort(p+".httpGet.port", h.Port)
		for j, hd := range h.HTTPHeaders {
			if !tokenRE.MatchString(hd.Name) {
				v.errorf(fmt.Sprintf("%s.httpGet.httpHeaders[%d].name", p, j), "invalid header name %q", hd.Name)
			}
		}
	}
	if t := pr.TCPSocket; t != nil {
		v.checkPort(p+".tcpSocket.port", t.Port)
	}
	if e := pr.Exec; e != nil && len(e.Command) == 0 {
		v.errorf(p+".exec.command", "command must not be empty")
	}
	if pr.InitialDelaySeconds < 0 {
		v.errorf(p+".initialDelaySeconds", "must not be negative")
	}
	for _, f := range []struct {
		name string
		val  int32
	}{{"periodSeconds", pr.PeriodSeconds}, {"timeoutSeconds", pr.TimeoutSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
		if f.val < 1 {
			v.errorf(p+"."+f.name, "must be at least 1, got %d", f.val)
		}
	}
	if kind != "readiness" && pr.SuccessThreshold > 1 {
		v.errorf(p+".successThreshold", "must be 1 for a %s probe (Kubernetes rule), got %d", kind, pr.SuccessThreshold)
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		if kind == "readiness" {
			v.errorf(p+".terminationGracePeriodSeconds", "must not be set for a readiness probe (Kubernetes rule)")
		} else if *g < 1 {
			v.errorf(p+".terminationGracePeriodSeconds", "must be at least 1, got %d", *g)
		}
	}
}

func (v *validator) checkPort(p string, port any) {
	switch x := port.(type) {
	case nil:
	case int:
		if x < 1 || x > 65535 {
			v.errorf(p, "port %d is out of range (1-65535)", x)
		}
	case string:
		if !dnsLabelRE.MatchString(x) || len(x) > 15 {
			v.errorf(p, "invalid port name %q", x)
		}
	}
}

func (v *validator) serviceNames() []string {
	var out []string
	for _, svc := range v.s.Services {
		out = append(out, svc.Name)
	}
	return out
}
