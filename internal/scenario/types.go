// Package scenario defines drill's declarative scenario format
// (apiVersion drill.dev/v1alpha1, kind Scenario), decodes it strictly from
// YAML with file:line:col positions, and validates it.
//
// The types here are the contract every other package reads: the planner
// (internal/plan) turns a Scenario into a timeline, the injectors read
// [Fault], the load engine reads [Stream], the local runtime reads
// [Service] and [Probe], and the assertions read [Assertion].
//
// Units live in types: [Duration] ("250ms", "15s"), [Rate] ("2800/s",
// "1400/1s", "90/m"), [ByteSize] ("64KiB"), [Percentile] ("p99", "99.9").
// A zero value of an optional field means "unset"; the field's doc comment
// gives the default applied by [Scenario.SetDefaults].
//
// Each fault kind and each assertion kind has one home: a [FaultSpec]
// (fault_*.go) or an [AssertionSpec] (assertion_*.go) holding the keys
// the kind needs and takes, its defaults, its own rules, its reference
// docs and an example, registered in [FaultSpecs] or [AssertionSpecs].
// Defaults, validation, `drill plan`, the generated reference and
// internal/inject ([CheckFault]) all read the spec; CONTRIBUTING.md says
// how to add a kind.
package scenario

// APIVersion is the only scenario apiVersion this drill understands.
const APIVersion = "drill.dev/v1alpha1"

// KindScenario is the only scenario kind.
const KindScenario = "Scenario"

// Scenario is one drill: what to start, what load to drive, which faults to
// inject when, what to watch and what to assert.
type Scenario struct {
	// APIVersion is always drill.dev/v1alpha1; required.
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	// Kind is always Scenario; required.
	Kind string `yaml:"kind" json:"kind"`
	// Metadata names the scenario; required.
	Metadata Metadata `yaml:"metadata" json:"metadata"`

	// Environment says where the system under test runs. Default: local.
	Environment Environment `yaml:"environment" json:"environment"`
	// Timeline fixes the run's length and its named phases.
	Timeline Timeline `yaml:"timeline" json:"timeline"`
	// Dependencies are started locally for the run (local environment only).
	Dependencies []Dependency `yaml:"dependencies,omitempty" json:"dependencies,omitempty"`
	// Toxiproxy says where proxies live. Default: embedded in drill.
	Toxiproxy Toxiproxy `yaml:"toxiproxy,omitempty" json:"toxiproxy,omitempty"`
	// Proxies are Toxiproxy proxies in front of dependencies.
	Proxies []Proxy `yaml:"proxies,omitempty" json:"proxies,omitempty"`
	// Services are the systems under test (local: run as replicas by the
	// local runtime; kubernetes: found by selector).
	Services []Service `yaml:"services,omitempty" json:"services,omitempty"`
	// Streams are the open-model load streams.
	Streams []Stream `yaml:"streams,omitempty" json:"streams,omitempty"`
	// Load says where the streams' load is generated. Default: in the drill
	// process.
	Load *LoadSpec `yaml:"load,omitempty" json:"load,omitempty"`
	// Faults are injected at set times of the timeline.
	Faults []Fault `yaml:"faults,omitempty" json:"faults,omitempty"`
	// Observers watch the system besides the load streams.
	Observers Observers `yaml:"observers,omitempty" json:"observers,omitempty"`
	// StopConditions end a fault early, stop load, or abort the run.
	StopConditions []StopCondition `yaml:"stopConditions,omitempty" json:"stopConditions,omitempty"`
	// Assertions are judged after the run, each over one window.
	Assertions []Assertion `yaml:"assertions,omitempty" json:"assertions,omitempty"`
	// Claims are times a source document claims (e.g. "unready at T=35 s");
	// each is reported beside the measured time as a finding, never gated.
	Claims []Claim `yaml:"claims,omitempty" json:"claims,omitempty"`
	// Redact adds header names and query keys to redact, and headers,
	// query keys and env names whose values may be recorded, to the rules
	// that keep secrets out of everything drill writes; the default rules
	// always apply.
	Redact Redaction `yaml:"redact,omitempty" json:"redact,omitempty"`
	// Compare overrides the rules by which `drill compare` and `drill
	// history` call a run of this scenario a regression against its
	// baseline; unset keys keep their defaults, and command-line flags
	// override both.
	Compare *Compare `yaml:"compare,omitempty" json:"compare,omitempty"`

	// File is the path the scenario was read from (not part of the YAML).
	File string `yaml:"-" json:"-"`
	// Positions maps a field path as the user wrote it
	// (e.g. "faults[0].toxic") to its position in File (not part of the YAML).
	Positions map[string]Position `yaml:"-" json:"-"`
}

// Position is a 1-based line and column in a scenario file.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	// File is set when the value came from another file than the scenario
	// (a Deployment manifest); empty means [Scenario.File].
	File string `json:"file,omitempty"`
}

// Metadata names and describes a scenario.
type Metadata struct {
	// Name is a DNS-label-like identifier (lower case, digits, '-'); required.
	// It names the report directory.
	Name string `yaml:"name" json:"name"`
	// Description is free text for people.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Sources lists the spec clauses the drill proves (e.g. "HEALTH-ORD-001 MC-FD-01").
	Sources []string `yaml:"sources,omitempty" json:"sources,omitempty"`
	// Labels are free key/value pairs copied into reports.
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// EnvironmentType is where the system under test runs.
type EnvironmentType string

// Environment types.
const (
	// EnvLocal runs dependencies, Toxiproxy and services on this machine.
	EnvLocal EnvironmentType = "local"
	// EnvKubernetes reaches a cluster through kubeconfig.
	EnvKubernetes EnvironmentType = "kubernetes"
	// EnvCompose brings the team's own Docker Compose file up on this machine's
	// Docker engine and routes to it with Traefik's Docker-provider rules.
	EnvCompose EnvironmentType = "compose"
)

// Environment says where the system under test runs and what a run may touch.
type Environment struct {
	// Type is local (default), kubernetes or compose.
	Type EnvironmentType `yaml:"type,omitempty" json:"type,omitempty"`
	// Kubernetes is required when Type is kubernetes.
	Kubernetes *KubernetesEnv `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty"`
	// Local tunes how a local environment shares this machine's CPU between
	// drill and the system under test.
	Local *LocalEnv `yaml:"local,omitempty" json:"local,omitempty"`
	// Compose is required when Type is compose.
	Compose *ComposeEnv `yaml:"compose,omitempty" json:"compose,omitempty"`
}

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

// SUTPriority says how the system under test shares the CPU with drill in a
// local environment.
type SUTPriority string

// SUT priorities.
const (
	// SUTPriorityLower runs replicas and dependencies at a lower CPU weight
	// than drill (the default).
	SUTPriorityLower SUTPriority = "lower"
	// SUTPrioritySame runs them at drill's own weight.
	SUTPrioritySame SUTPriority = "same"
)

// LocalEnv tunes a local environment. On one machine the load generator
// stands in for clients on other machines, so by default drill gives its
// own process (the generator and the clock that judges it) CPU priority
// over the system under test.
type LocalEnv struct {
	// SUTPriority is lower (default) or same. lower: the services' replicas
	// and the throwaway PostgreSQL run in a cgroup of their own per run
	// (drill-<run>; on cgroup v1 cpu.shares 1024 per CPU, so all of them
	// together weigh as much as one busy thread per core; cpu.weight 25
	// against 100 on v2) where drill may create one, else at nice +5; same:
	// at drill's own weight (a CPU limit of a service is applied either
	// way).
	SUTPriority SUTPriority `yaml:"sutPriority,omitempty" json:"sutPriority,omitempty"`
}

// KubernetesEnv is the allow-list a kubernetes run is held to: drill refuses
// any kubeconfig context or namespace not listed (exit 2, nothing touched).
type KubernetesEnv struct {
	// AllowedContexts lists kubeconfig context names the run may use; at
	// least one is required.
	AllowedContexts []string `yaml:"allowedContexts" json:"allowedContexts"`
	// AllowedNamespaces lists namespaces the run may touch; default: only
	// Namespace.
	AllowedNamespaces []string `yaml:"allowedNamespaces,omitempty" json:"allowedNamespaces,omitempty"`
	// Namespace is the namespace a run uses unless -n/--namespace names
	// another allowed one.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
}

// LoadSpec says where a run's load is generated. The zero value (or no load
// section) is the drill process itself.
type LoadSpec struct {
	// Workers spreads every stream's schedule over this many worker pods of
	// one Kubernetes Indexed Job (kubernetes environment only): worker i
	// sends the requests whose sequence number is i mod Workers, all timed
	// from one shared t=0, so together they send exactly the one-process
	// schedule. 0 (default): load from the drill process. At most 1000.
	Workers int `yaml:"workers,omitempty" json:"workers,omitempty"`
	// Image is the container image the workers run: a drill image with the
	// binary at /drill (the FROM scratch image of drill's static binary);
	// required with workers.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
}

// Timeline fixes the run's length and phases. Offsets are from the start of
// load (t=0). The planner derives windows: baseline = [Warmup, first fault
// on), fault:<name> = [at, at+for), recovery:<name> = [off,
// min(off+Recovery, Duration)), run = [Warmup, Duration).
type Timeline struct {
	// Duration is the whole run from t=0; required, > 0 and at most 24h
	// (longer soaks are several runs).
	Duration Duration `yaml:"duration" json:"duration"`
	// Warmup is excluded from every window; default 0.
	Warmup Duration `yaml:"warmup,omitempty" json:"warmup,omitempty"`
	// Recovery is the length of each recovery:<fault> window; default 10s.
	Recovery Duration `yaml:"recovery,omitempty" json:"recovery,omitempty"`
	// ReadyTimeout bounds the wait for services to become ready before t=0;
	// default 120s.
	ReadyTimeout Duration `yaml:"readyTimeout,omitempty" json:"readyTimeout,omitempty"`
	// Windows are extra named windows, e.g. {name: steady, from: 10s, to: 20s}.
	Windows []WindowSpec `yaml:"windows,omitempty" json:"windows,omitempty"`
}

// WindowSpec is a user-named window [From, To) on the run's clock.
type WindowSpec struct {
	// Name is unique; assertions refer to it. Not run, baseline, fault:* or recovery:*.
	Name string `yaml:"name" json:"name"`
	// From is the window's start from t=0; at or after the warmup.
	From Duration `yaml:"from" json:"from"`
	// To is the window's end from t=0 (excluded); at most the run's duration.
	// User windows must not overlap each other.
	To Duration `yaml:"to" json:"to"`
}

// Dependency is something started locally for the run. Exactly one of
// Postgres or HTTPStub is set.
type Dependency struct {
	// Name is referenced as ${dependencies.<name>.addr} etc.
	Name string `yaml:"name" json:"name"`
	// Postgres starts a throwaway PostgreSQL.
	Postgres *PostgresDep `yaml:"postgres,omitempty" json:"postgres,omitempty"`
	// HTTPStub starts a stub HTTP service.
	HTTPStub *HTTPStubDep `yaml:"httpStub,omitempty" json:"httpStub,omitempty"`
}

// PostgresMode chooses how a throwaway PostgreSQL is started.
type PostgresMode string

// PostgreSQL start modes.
const (
	// PostgresAuto uses the machine's binaries (initdb, postgres) if found,
	// else testcontainers-go if a Docker engine answers.
	PostgresAuto PostgresMode = "auto"
	// PostgresBinaries requires initdb and postgres (on PATH or in
	// /usr/lib/postgresql/<version>/bin).
	PostgresBinaries PostgresMode = "binaries"
	// PostgresContainer requires a Docker engine.
	PostgresContainer PostgresMode = "container"
)

// PostgresDep is a throwaway PostgreSQL cluster (fsync off, random free port
// on 127.0.0.1, removed at exit). Exposes ${dependencies.<name>.addr}
// (host:port), .host, .port and .dsn.
type PostgresDep struct {
	// Mode is auto (default), binaries or container.
	Mode PostgresMode `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Database is created at start; default "drill".
	Database string `yaml:"database,omitempty" json:"database,omitempty"`
	// User is the superuser name; default "drill".
	User string `yaml:"user,omitempty" json:"user,omitempty"`
	// Image is the container image for mode container; default postgres:16-alpine.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// MaxConnections is PostgreSQL's max_connections; default 300.
	MaxConnections int `yaml:"maxConnections,omitempty" json:"maxConnections,omitempty"`
	// InitSQL runs once after start (schema for the service under test).
	InitSQL string `yaml:"initSQL,omitempty" json:"initSQL,omitempty"`
}

// HTTPStubDep is a small local HTTP service answering every request with
// Status and Body after Latency (e.g. the tax API of BULKHEAD-PAY-001).
// Exposes ${dependencies.<name>.addr} and .url.
type HTTPStubDep struct {
	// Latency is added before each response; default 0.
	Latency Duration `yaml:"latency,omitempty" json:"latency,omitempty"`
	// Status is the HTTP status; default 200.
	Status int `yaml:"status,omitempty" json:"status,omitempty"`
	// Body is the response body; default "{}".
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
	// ContentType default "application/json".
	ContentType string `yaml:"contentType,omitempty" json:"contentType,omitempty"`
}

// Toxiproxy says where the scenario's proxies live.
type Toxiproxy struct {
	// URL of a remote Toxiproxy HTTP API (e.g. http://toxiproxy.staging:8474).
	// Empty: drill embeds a Toxiproxy server on loopback.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
}

// Proxy is a Toxiproxy proxy. In embedded mode drill creates it; in remote
// mode drill creates it unless it exists (then Listen/Upstream must match or
// be empty). Exposes ${proxies.<name>.addr} (the resolved listen address).
type Proxy struct {
	// Name is the Toxiproxy proxy name; required, unique.
	Name string `yaml:"name" json:"name"`
	// Listen is host:port; default "127.0.0.1:0" (a free port).
	Listen string `yaml:"listen,omitempty" json:"listen,omitempty"`
	// Upstream is host:port, may use ${dependencies.<name>.addr}; required.
	Upstream string `yaml:"upstream" json:"upstream"`
}

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
	// Resources are the container's resources, as a Deployment writes them;
	// overrides Manifest's. Only limits.cpu is applied (local environment).
	Resources *Resources `yaml:"resources,omitempty" json:"resources,omitempty"`
	// Selector finds the service's pods in kubernetes mode (e.g. app=order-gateway).
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
	// URL is the service's base URL in kubernetes mode.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
}

// CPULimit is the service's resources.limits.cpu (0 when none is given).
func (s Service) CPULimit() CPUQuantity {
	if s.Resources == nil || s.Resources.Limits == nil {
		return 0
	}
	return s.Resources.Limits.CPU
}

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

// Stream is one open-model load stream: requests are sent on the pacer's
// schedule whatever the responses, and latency counts from the intended send
// time.
type Stream struct {
	// Name is unique; assertions refer to it.
	Name string `yaml:"name" json:"name"`
	// Targets are round-robin; each may use ${...} and a body template.
	Targets []Target `yaml:"targets,omitempty" json:"targets,omitempty"`
	// TargetsFile reads vegeta targets (format http or json) from a file
	// relative to the scenario.
	TargetsFile *TargetsFile `yaml:"targetsFile,omitempty" json:"targetsFile,omitempty"`
	// Rate is a constant rate, e.g. 2800/s, at most 1000000/s (as is every
	// rate of Ramp and Steps). Exactly one of Rate, Ramp, Steps.
	Rate *Rate `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Ramp is a linear ramp from From to To over the stream's duration.
	Ramp *Ramp `yaml:"ramp,omitempty" json:"ramp,omitempty"`
	// Steps are consecutive constant rates.
	Steps []Step `yaml:"steps,omitempty" json:"steps,omitempty"`
	// Start is the offset from t=0; default 0.
	Start Duration `yaml:"start,omitempty" json:"start,omitempty"`
	// Duration default: until the end of the timeline; with Steps, the sum
	// of the steps (if set, it must equal that sum).
	Duration Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	// Timeout per request (whole exchange), above 0: a written 0 is
	// refused, not replaced by the default; default 5s.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxConnections caps connections per host; 0 = unlimited.
	MaxConnections int `yaml:"maxConnections,omitempty" json:"maxConnections,omitempty"`
	// MaxWorkers caps concurrent in-flight requests, at most 100,000; 0 =
	// engine default (1.25 x peak rate x timeout + 64, at most 10,000).
	MaxWorkers int `yaml:"maxWorkers,omitempty" json:"maxWorkers,omitempty"`
	// KeepAlive reuses connections; default true.
	KeepAlive *bool `yaml:"keepAlive,omitempty" json:"keepAlive,omitempty"`
	// Retry is the client behaviour on failure; default none.
	Retry *Retry `yaml:"retry,omitempty" json:"retry,omitempty"`
	// LagBudget: the run is invalid (exit 4) if more than Fraction of
	// requests went out later than Late; default 1% later than 10ms.
	LagBudget *LagBudget `yaml:"lagBudget,omitempty" json:"lagBudget,omitempty"`
	// MaxConnectionErrors bounds the share (0..1) of the stream's requests
	// in the run window that failed at connection level (refused,
	// unreachable, dial timeout, reset before a response; not HTTP error
	// statuses nor timeouts of a request that had a connection). Above it
	// the run is invalid (exit 4): the load did not reach a server, so its
	// figures say nothing about the system. Default 0.5; set 1 when a fault
	// is meant to break the stream's connections (e.g. down on the proxy
	// it targets).
	MaxConnectionErrors *float64 `yaml:"maxConnectionErrors,omitempty" json:"maxConnectionErrors,omitempty"`
	// BasicAuth sends HTTP basic authentication with every request of the
	// stream (its targets and its targetsFile's); a target may then not set
	// an Authorization header.
	BasicAuth *BasicAuth `yaml:"basicAuth,omitempty" json:"basicAuth,omitempty"`
}

// BasicAuth sets the Authorization header of every request of a stream to
// "Basic " + base64(username:password) (RFC 7617). Take the credentials
// from drill's environment with ${env.NAME} rather than writing them in
// the scenario: the recorded scenario keeps the ${env.NAME} references as
// written, a password written out reads REDACTED, and the values never
// appear in anything drill writes.
type BasicAuth struct {
	// Username may use ${...} (e.g. ${env.API_USER}); required, without ':'.
	Username string `yaml:"username" json:"username"`
	// Password may use ${...} (e.g. ${env.API_PASSWORD}); may be empty.
	Password string `yaml:"password,omitempty" json:"password,omitempty"`
}

// Target is one request template.
type Target struct {
	// Method default GET.
	Method string `yaml:"method,omitempty" json:"method,omitempty"`
	// URL is required, absolute (http://...), may use ${...}.
	URL string `yaml:"url" json:"url"`
	// Headers are sent on every request; values may use ${...}. Only the
	// values of headers known to carry no secret (see Redaction:
	// Content-Type, Accept, ..., redact.allowHeaders) are recorded; the
	// others read REDACTED in everything drill writes.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Body is a Go text/template with {{.ID}} (unique per request),
	// {{.Seq}} (sequence number) and {{.Time}} (RFC 3339 intended send
	// time); it may use ${...}. Reports record only its size and a sha256
	// prefix, never its text.
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
}

// TargetsFile is a vegeta targets file.
type TargetsFile struct {
	// Path is relative to the scenario file; required.
	Path string `yaml:"path" json:"path"`
	// Format is http (default) or json.
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
}

// Ramp is a linear rate ramp.
type Ramp struct {
	// From is the rate at the stream's start; required (may be 0/s).
	From Rate `yaml:"from" json:"from"`
	// To is the rate at the stream's end; required.
	To Rate `yaml:"to" json:"to"`
}

// Step is one constant-rate step of a stream.
type Step struct {
	// Rate is the step's constant rate; required, above 0.
	Rate Rate `yaml:"rate" json:"rate"`
	// For is how long the step lasts; required, above 0.
	For Duration `yaml:"for" json:"for"`
}

// RetryPolicy names a client retry behaviour.
type RetryPolicy string

// Retry policies.
const (
	// RetryNone sends each request once (default).
	RetryNone RetryPolicy = "none"
	// RetryFixed retries failures after a fixed Interval with no jitter (the
	// retry storm of BULKHEAD-PAY-001 ADV-IR-01).
	RetryFixed RetryPolicy = "fixed"
	// RetryAfter retries after the response's Retry-After (or Interval).
	RetryAfter RetryPolicy = "retry-after"
)

// Retry is the client's retry behaviour.
type Retry struct {
	// Policy is none, fixed or retry-after; required.
	Policy RetryPolicy `yaml:"policy" json:"policy"`
	// Interval between attempts for fixed; fallback for retry-after; default 50ms.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// MaxAttempts including the first; default 3, at most 100.
	MaxAttempts int `yaml:"maxAttempts,omitempty" json:"maxAttempts,omitempty"`
	// On lists status codes that trigger a retry; default 429, 502, 503, 504
	// and transport errors.
	On []int `yaml:"on,omitempty" json:"on,omitempty"`
}

// LagBudget bounds how far behind its schedule the load generator may fall.
type LagBudget struct {
	// Late is the lag beyond which a request counts as late; default 10ms.
	Late Duration `yaml:"late,omitempty" json:"late,omitempty"`
	// Fraction is the share of late requests allowed, 0..1; default 0.01.
	Fraction float64 `yaml:"fraction,omitempty" json:"fraction,omitempty"`
}

// FaultType names a fault kind.
type FaultType string

// Fault is one injected fault, on at At and off at At+For.
type Fault struct {
	// Name is unique; it names the fault:<name> and recovery:<name> windows.
	Name string `yaml:"name" json:"name"`
	// Type is a toxic type, down, process-pause or container-pause.
	Type FaultType `yaml:"type" json:"type"`
	// Proxy names a proxy (toxics and down).
	Proxy string `yaml:"proxy,omitempty" json:"proxy,omitempty"`
	// Dependency names a local dependency (process-pause, container-pause).
	Dependency string `yaml:"dependency,omitempty" json:"dependency,omitempty"`
	// Stream is upstream (client->server bytes), downstream (default), or both.
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Toxicity is the probability 0..1 that a connection is affected; default 1.
	Toxicity *float64 `yaml:"toxicity,omitempty" json:"toxicity,omitempty"`
	// At is when the fault turns on, from t=0; required. "manual" leaves
	// the start to an operator on the console (drill run --ui).
	At Duration `yaml:"at" json:"at"`
	// For is how long it stays on; required, > 0. "manual" keeps it on
	// until an operator ends it or the run ends.
	For Duration `yaml:"for" json:"for"`
	// ManualStart is set by "at: manual": an operator starts the fault
	// from the console (At is then 0 and unused).
	ManualStart bool `yaml:"-" json:"manualStart,omitempty"`
	// ManualEnd is set by "for: manual": the fault stays on until an
	// operator ends it or the run ends (For is then 0 and unused).
	ManualEnd bool `yaml:"-" json:"manualEnd,omitempty"`

	// Latency (latency toxic), rounded to ms.
	Latency *Duration `yaml:"latency,omitempty" json:"latency,omitempty"`
	// Jitter (latency toxic), rounded to ms; must be <= Latency.
	Jitter *Duration `yaml:"jitter,omitempty" json:"jitter,omitempty"`
	// Timeout (timeout, reset_peer toxics), rounded to ms; 0 = hold forever.
	Timeout *Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Rate (bandwidth toxic) in KB/s (1 KB = 1000 bytes).
	RateKBps *int64 `yaml:"rateKBps,omitempty" json:"rateKBps,omitempty"`
	// Delay (slow_close: ms; slicer: µs).
	Delay *Duration `yaml:"delay,omitempty" json:"delay,omitempty"`
	// AverageSize (slicer) is the average chunk size in bytes.
	AverageSize *ByteSize `yaml:"averageSize,omitempty" json:"averageSize,omitempty"`
	// SizeVariation (slicer) in bytes; must be below AverageSize.
	SizeVariation *ByteSize `yaml:"sizeVariation,omitempty" json:"sizeVariation,omitempty"`
	// Bytes (limit_data) per connection per direction.
	Bytes *ByteSize `yaml:"bytes,omitempty" json:"bytes,omitempty"`
}

// Observers watch the system besides the load streams.
type Observers struct {
	// Pods watches pods by label selector (kubernetes).
	Pods []PodObserver `yaml:"pods,omitempty" json:"pods,omitempty"`
	// EndpointSlices watches a Service's EndpointSlices (kubernetes).
	EndpointSlices []EndpointSliceObserver `yaml:"endpointSlices,omitempty" json:"endpointSlices,omitempty"`
	// Probes polls HTTP endpoints (e.g. /healthz/ready) and records results.
	Probes []ProbeObserver `yaml:"probes,omitempty" json:"probes,omitempty"`
	// Metrics scrapes Prometheus text from /metrics endpoints.
	Metrics []MetricsObserver `yaml:"metrics,omitempty" json:"metrics,omitempty"`
	// PromQL queries a Prometheus server.
	PromQL []PromQLObserver `yaml:"promql,omitempty" json:"promql,omitempty"`
}

// PodObserver watches pods matching Selector in Namespace.
type PodObserver struct {
	// Name is unique among observers; it names the recorded events.
	Name string `yaml:"name" json:"name"`
	// Selector is a label selector, e.g. app=order-gateway; required.
	Selector string `yaml:"selector" json:"selector"`
	// Namespace default: the run's namespace; must be allowed.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
}

// EndpointSliceObserver watches the EndpointSlices labelled
// kubernetes.io/service-name=<Service>.
type EndpointSliceObserver struct {
	// Name is unique among observers; it names the recorded events.
	Name string `yaml:"name" json:"name"`
	// Service is the Kubernetes Service name; required.
	Service string `yaml:"service" json:"service"`
	// Namespace default: the run's namespace; must be allowed.
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
}

// ProbeObserver polls URL every Interval (default 1s) with Timeout (default 1s).
type ProbeObserver struct {
	// Name is unique among observers; it names the recorded events.
	Name string `yaml:"name" json:"name"`
	// URL is polled with GET; 200-399 passes; may use ${...}; required.
	URL string `yaml:"url" json:"url"`
	// Interval between polls; default 1s.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// Timeout per poll; default 1s.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// MetricsObserver scrapes URL every Interval (default 1s) and records the
// named metric families (all when empty) as metric events.
type MetricsObserver struct {
	// Name is unique among observers; it names the recorded events.
	Name string `yaml:"name" json:"name"`
	// URL of a Prometheus text /metrics endpoint; may use ${...}; required.
	URL string `yaml:"url" json:"url"`
	// Interval between scrapes; default 1s.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// Metrics are the families to record; default all.
	Metrics []string `yaml:"metrics,omitempty" json:"metrics,omitempty"`
}

// PromQLObserver runs Query against the Prometheus at URL every Interval
// (default 5s) and records each series as metric events named Name.
type PromQLObserver struct {
	// Name is unique among observers; it names the recorded metric events.
	Name string `yaml:"name" json:"name"`
	// URL is the Prometheus server's base URL; required.
	URL string `yaml:"url" json:"url"`
	// Query is a PromQL instant query; required.
	Query string `yaml:"query" json:"query"`
	// Interval between queries; default 5s.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
}

// StopAction is what a stop condition does when it fires.
type StopAction string

// Stop actions, in the graded ladder of docs/DESIGN.md §15.
const (
	StopWarn      StopAction = "warn"       // log and record only
	StopEndFaults StopAction = "end-faults" // revert every fault now, keep load and measuring
	StopLoad      StopAction = "stop-load"  // revert faults and stop load
	StopAbort     StopAction = "abort"      // end the run (exit 3)
)

// StopCondition fires when Stream's error rate stays above ErrorRateAbove
// (0..1) for For.
type StopCondition struct {
	// Name is unique; it names the condition in events and reports.
	Name string `yaml:"name" json:"name"`
	// Stream names the stream whose error rate is watched; required.
	Stream string `yaml:"stream" json:"stream"`
	// ErrorRateAbove is the error-rate threshold, above 0 and at most 1; required.
	ErrorRateAbove float64 `yaml:"errorRateAbove" json:"errorRateAbove"`
	// For is how long the rate must stay above the threshold; required.
	For Duration `yaml:"for" json:"for"`
	// Action is warn, end-faults (default), stop-load or abort.
	Action StopAction `yaml:"action,omitempty" json:"action,omitempty"`
}

// Redaction keeps secrets out of everything drill writes: run.json,
// seconds.jsonl, report.html, junit.xml, the terminal summary, logs
// (drill's and the replicas' pod logs), drill plan and drill validate
// output and error messages. The rule: a value is recorded only where
// drill knows it carries no secret; every other value reads REDACTED.
// Request header values are recorded only for Accept, Accept-Charset,
// Accept-Encoding, Accept-Language, Cache-Control, Connection,
// Content-Encoding, Content-Language, Content-Length, Content-Type,
// If-Match, If-Modified-Since, If-None-Match, Pragma, Range, Traceparent,
// User-Agent, X-Correlation-Id, the X-Request-* family and allowHeaders.
// All of a URL's userinfo is replaced, a lone user (https://token@host) as
// well as user:password, in connection strings too. URL query values are
// recorded only for the keys page, per_page, page_size, limit, offset,
// sort, order, format, lang, locale, sslmode, connect_timeout,
// application_name and allowQueryKeys, and where the value is harmless
// (below). Env values (services' env, setup env, environment.compose.env)
// are recorded only where the value is harmless: a number of fewer than
// 12 digits, a duration with units (30s), a boolean (true, false, yes, no,
// on, off), or made only of drill's references; or where allowEnv names
// the variable. A value written only as ${...} references (${env.NAME},
// ${proxies.NAME.addr}, "Bearer ${env.API_TOKEN}", http://${services.NAME.addr})
// is recorded as written in every field, basicAuth passwords and
// sensitive headers included: the reference is no secret, the value it
// expands to is, and that value is redacted wherever it appears. Names the
// rules call sensitive stay redacted whatever their literal value looks
// like, allowed or not: the headers Authorization, Proxy-Authorization,
// Cookie, Set-Cookie, X-Api-Key, Api-Key, X-Auth-Token, X-Access-Token,
// X-Csrf-Token, X-Xsrf-Token, X-Amz-Security-Token, X-Vault-Token,
// Private-Token and any header whose name contains auth, token, secret,
// password, passwd, apikey, api-key, api_key, credential, signature,
// session or cookie (also in free text, "Name: value"); the query and
// key=value keys token, access_token, refresh_token, id_token, api_key,
// apikey, api-key, key, password, passwd, pwd, pass, secret, client_secret,
// sig, signature, auth, session, sessionid, credential, credentials,
// X-Amz-Signature, X-Amz-Credential and X-Amz-Security-Token and any key
// containing token, secret, password, passwd, apikey, api_key, api-key,
// signature or credential (so password= in a key=value DSN, also in free
// text); env variables whose name contains PASSWORD, PASSWD, SECRET,
// TOKEN, CREDENTIAL, APIKEY, API_KEY or PRIVATE_KEY or has the word PAT,
// KEY, PASS, AUTH, AUTHORIZATION, COOKIE, SIG or SIGNATURE (words split at
// _ - .; GITHUB_PAT yes, PATH no). In free text such as log lines, a key
// whose last word is failed, successful, removed, total or count keeps a
// boolean or whole-number value (authentication_failed=true). Also
// redacted: basicAuth passwords (and the username when the password is
// empty, the form of an API key sent as the user); the argument after a
// command-line flag with a sensitive name (--password x); request bodies,
// recorded as their size and a sha256 prefix; and every value read with
// ${env.NAME} or found by these rules (values redacted only because no
// allow list keeps them when at least 8 bytes long), wherever else it
// appears.
type Redaction struct {
	// Headers are further header names whose values are redacted (any
	// case), even when allowed.
	Headers []string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// QueryKeys are further URL query and key=value keys whose values are
	// redacted (any case), even when allowed.
	QueryKeys []string `yaml:"queryKeys,omitempty" json:"queryKeys,omitempty"`
	// AllowHeaders are further request headers whose values are recorded
	// (any case; a trailing * stands for every header it starts, e.g.
	// X-Build-*). A header the rules call sensitive cannot be allowed.
	AllowHeaders []string `yaml:"allowHeaders,omitempty" json:"allowHeaders,omitempty"`
	// AllowQueryKeys are further URL query keys whose values are recorded
	// (any case). A key the rules call sensitive cannot be allowed.
	AllowQueryKeys []string `yaml:"allowQueryKeys,omitempty" json:"allowQueryKeys,omitempty"`
	// AllowEnv are environment variable names (services' env, setup env,
	// environment.compose.env) whose values are recorded, with URL
	// userinfo and sensitive query values still redacted (any case). A
	// name the rules call sensitive cannot be allowed.
	AllowEnv []string `yaml:"allowEnv,omitempty" json:"allowEnv,omitempty"`
}

// Compare holds the regression rules of `drill compare` and `drill
// history`. A figure is a regression only when it is worse than the
// baseline's by more than both its relative and its absolute margin, so
// noise on very small figures is not flagged. Unset keys keep the
// defaults given with each.
type Compare struct {
	// P99Increase is the relative margin for a stream window's p99
	// latency: worse by more than this fraction of the baseline's (0.2 =
	// 20 %) and by more than P99Slack is a regression. At least 0.
	// Default 0.2.
	P99Increase *float64 `yaml:"p99Increase,omitempty" json:"p99Increase,omitempty"`
	// P99Slack is the absolute margin for a stream window's p99 latency.
	// Default 5ms.
	P99Slack *Duration `yaml:"p99Slack,omitempty" json:"p99Slack,omitempty"`
	// ErrorRateIncrease is how far a stream window's error rate (failed /
	// completed requests) may rise, as a ratio of requests: 0.005 is half
	// a percentage point. Between 0 and 1. Default 0.005.
	ErrorRateIncrease *float64 `yaml:"errorRateIncrease,omitempty" json:"errorRateIncrease,omitempty"`
	// RecoveryIncrease is the relative margin for the times of findings
	// (recovery, detection, unroutable time): worse by more than this
	// fraction of the baseline's and by more than RecoverySlack is a
	// regression, and so is "never"/"not recovered" where the baseline had
	// a time. At least 0. Default 0.25.
	RecoveryIncrease *float64 `yaml:"recoveryIncrease,omitempty" json:"recoveryIncrease,omitempty"`
	// RecoverySlack is the absolute margin for the times of findings.
	// Default 1s.
	RecoverySlack *Duration `yaml:"recoverySlack,omitempty" json:"recoverySlack,omitempty"`
	// NewRestarts makes more restarts of a service than in the baseline a
	// regression. Default true.
	NewRestarts *bool `yaml:"newRestarts,omitempty" json:"newRestarts,omitempty"`
	// PassToFail makes an assertion that passed in the baseline and does
	// not pass now a regression. Default true.
	PassToFail *bool `yaml:"passToFail,omitempty" json:"passToFail,omitempty"`
}

// AssertionType names an assertion kind (docs/DESIGN.md §9).
type AssertionType string

// ClaimFigure names a routing figure a claim is compared with.
type ClaimFigure string

// Claim figures, each measured from the fault's start (detection-*,
// left-*) or end (back-*), over the service's replicas.
const (
	ClaimDetectionFirst ClaimFigure = "detection-first" // first replica unready
	ClaimDetectionLast  ClaimFigure = "detection-last"  // last replica unready
	ClaimLeftFirst      ClaimFigure = "left-first"      // first replica out of routing
	ClaimLeftLast       ClaimFigure = "left-last"       // last replica out of routing
	ClaimBackFirst      ClaimFigure = "back-first"      // first replica back in routing, from the fault's end
	ClaimBackLast       ClaimFigure = "back-last"       // last replica back in routing, from the fault's end
)

// Claim is a time a source document claims for a fault, reported beside
// the one the run measured (a finding of kind claim: notice when they
// differ by more than Tolerance, info otherwise). Claims never change the
// exit code; gate with a detection or unroutable assertion.
type Claim struct {
	// Name is unique among claims.
	Name string `yaml:"name" json:"name"`
	// Source quotes or cites the claim (e.g. "tutorial: unready at T=35s").
	Source string `yaml:"source,omitempty" json:"source,omitempty"`
	// Service names the service the claim is about.
	Service string `yaml:"service" json:"service"`
	// Fault names the fault the claimed time is measured from.
	Fault string `yaml:"fault" json:"fault"`
	// Figure is detection-first, detection-last, left-first, left-last (from
	// the fault's start), back-first or back-last (from its end).
	Figure ClaimFigure `yaml:"figure" json:"figure"`
	// Value is the claimed time from the fault's start (or end, back-*).
	Value Duration `yaml:"value" json:"value"`
	// Tolerance is how far the measured time may be from Value and still
	// agree; default 1s.
	Tolerance *Duration `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
}

// Assertion is one check over one window. Which fields apply depends on Type.
type Assertion struct {
	// Name is unique; it names the JUnit test case. Default: type-window.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Type is the assertion kind.
	Type AssertionType `yaml:"type" json:"type"`
	// Window is run, baseline, fault:<name>, recovery:<name>, or a
	// timeline.windows name; default run.
	Window string `yaml:"window,omitempty" json:"window,omitempty"`
	// Source names a spec clause this assertion proves (e.g. INV-BH-02).
	Source string `yaml:"source,omitempty" json:"source,omitempty"`

	// Service names a service (restarts, endpoint-removal, flaps, ready).
	Service string `yaml:"service,omitempty" json:"service,omitempty"`
	// Stream names a stream (latency, error-rate, throughput, shed,
	// isolation, and recovery on a stream).
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`

	// Max is a count bound (restarts, flaps).
	Max *int `yaml:"max,omitempty" json:"max,omitempty"`
	// IncludeStartup also counts the restarts, crash loops and failed
	// starts of the service before load started (while services came up;
	// negative times on the run clock) (restarts). Default: true over the
	// run window, false over any other.
	IncludeStartup *bool `yaml:"includeStartup,omitempty" json:"includeStartup,omitempty"`
	// MinReady is the minimum ready replicas (ready).
	MinReady *int `yaml:"minReady,omitempty" json:"minReady,omitempty"`
	// Percentile for latency and endpoint-removal (default p99), and over
	// the replicas' detection times for detection (default p100: the last
	// replica).
	Percentile *Percentile `yaml:"percentile,omitempty" json:"percentile,omitempty"`
	// MaxLatency is a latency bound (latency, endpoint-removal, shed).
	MaxLatency *Duration `yaml:"maxLatency,omitempty" json:"maxLatency,omitempty"`
	// StatusClass for error-rate: 5xx, 4xx, errors (transport), non-2xx, any
	// (default: any failure = transport error or status >= 400).
	StatusClass string `yaml:"statusClass,omitempty" json:"statusClass,omitempty"`
	// Status narrows shed to one status code (e.g. 503); default 503 and 429.
	Status []int `yaml:"status,omitempty" json:"status,omitempty"`
	// MaxRate is a ratio bound 0..1 (error-rate).
	MaxRate *float64 `yaml:"maxRate,omitempty" json:"maxRate,omitempty"`
	// MinRatio is achieved/intended 0..1 (throughput); default 0.995.
	MinRatio *float64 `yaml:"minRatio,omitempty" json:"minRatio,omitempty"`
	// RetryAfter requires every shed response to carry Retry-After (shed).
	RetryAfter *bool `yaml:"retryAfter,omitempty" json:"retryAfter,omitempty"`

	// Metric names a metric family for metric and recovery assertions.
	Metric string `yaml:"metric,omitempty" json:"metric,omitempty"`
	// Labels select series of Metric (all must match).
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Op compares the metric with Value: <, <=, >, >=, ==, !=.
	Op string `yaml:"op,omitempty" json:"op,omitempty"`
	// Value is the metric bound.
	Value *float64 `yaml:"value,omitempty" json:"value,omitempty"`
	// Hold is how long the recovery condition must keep holding; default 2s.
	Hold *Duration `yaml:"hold,omitempty" json:"hold,omitempty"`
	// Within bounds the recovery time from the fault's end (recovery).
	Within *Duration `yaml:"within,omitempty" json:"within,omitempty"`
	// Fault names the fault whose end starts the recovery clock (recovery),
	// whose start starts the detection clock (detection), or after whose
	// end unroutable time counts (unroutable with afterFaultEnd); default
	// the fault of the window.
	Fault string `yaml:"fault,omitempty" json:"fault,omitempty"`
	// MaxDuration bounds a span of time: the longest interval with no ready
	// endpoint (unroutable) or the time from the fault's start to its
	// replicas going unready (detection).
	MaxDuration *Duration `yaml:"maxDuration,omitempty" json:"maxDuration,omitempty"`
	// AfterFaultEnd counts only the unroutable time after the fault ended
	// (unroutable); default false: all of it in the window.
	AfterFaultEnd *bool `yaml:"afterFaultEnd,omitempty" json:"afterFaultEnd,omitempty"`
	// Proxy names the proxy the service reaches its dependency through,
	// whose first answer the startup gate must wait for (startup-gate).
	Proxy string `yaml:"proxy,omitempty" json:"proxy,omitempty"`

	// MaxP99Ratio bounds the window p99 / baseline p99 (isolation).
	MaxP99Ratio *float64 `yaml:"maxP99Ratio,omitempty" json:"maxP99Ratio,omitempty"`
	// MaxErrorRateDelta bounds the window error rate minus baseline (isolation).
	MaxErrorRateDelta *float64 `yaml:"maxErrorRateDelta,omitempty" json:"maxErrorRateDelta,omitempty"`
}
