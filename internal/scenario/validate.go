package scenario

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/drillhq/drill/internal/composefile"
)

// Reference service names and builds (docs/DESIGN.md §17).
var (
	ReferenceServices = []string{"order-gateway", "payment-core"}
	Builds            = []string{"correct", "naive"}
	Balancings        = []string{string(BalancingRequest), string(BalancingConnection)}
)

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

// envNameRE matches a portable environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	EnvironmentTypes = []string{string(EnvCompose), string(EnvKubernetes), string(EnvLocal)}
	SUTPriorities    = []string{string(SUTPriorityLower), string(SUTPrioritySame)}
	PostgresModes    = []string{string(PostgresAuto), string(PostgresBinaries), string(PostgresContainer)}
	FaultStreams     = []string{"both", "downstream", "upstream"}
	RetryPolicies    = []string{string(RetryFixed), string(RetryNone), string(RetryAfter)}
	StopActions      = []string{string(StopAbort), string(StopEndFaults), string(StopLoad), string(StopWarn)}
	StatusClasses    = []string{"4xx", "5xx", "any", "errors", "non-2xx"}
	ClaimFigures     = []string{string(ClaimBackFirst), string(ClaimBackLast), string(ClaimDetectionFirst), string(ClaimDetectionLast),
		string(ClaimLeftFirst), string(ClaimLeftLast)}
	MetricOps      = []string{"!=", "<", "<=", "==", ">", ">="}
	TargetsFormats = []string{"http", "json"}
	HTTPSchemes    = []string{"HTTP", "HTTPS"}
)

var (
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	nameRE     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$`)
	metricRE   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	tokenRE    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Upper bounds drill run would otherwise meet only after it started the
// scenario's dependencies and services. Validate (and so drill validate and
// drill plan) refuses anything beyond them before anything starts.
const (
	// MaxRunDuration bounds timeline.duration (and so every offset inside
	// it): 24 h. A drill is a bounded experiment (the longest game day is
	// a working day); every stream keeps one measurement bucket per second
	// for the whole run, in memory and in run.json, and the fault journal
	// keeps a fault's leftovers until the run ends, so a mistyped unit
	// (87600h for 87.6s) must not start a run that never ends.
	MaxRunDuration = 24 * time.Hour
	// MaxStreamRate bounds every rate of a stream (rate, ramp.from,
	// ramp.to, steps[].rate) in req/s: 1,000,000/s. drill's engine sends
	// tens of thousands of requests per second per core, and its schedule
	// needs a send interval of at least 1 ns (at most 1e9/s); a figure
	// above a million per second is a typo, not a load test.
	MaxStreamRate = 1_000_000
	// MaxStreamWorkers bounds a stream's maxWorkers: 100,000. Each worker
	// holds an in-flight request and its connection (a file descriptor);
	// the engine's own default stops at 10,000.
	MaxStreamWorkers = 100_000
)

// Validate checks a scenario after [Scenario.SetDefaults] and returns every
// problem at once as *[Errors] (nil when it is valid). It checks that
// references resolve (proxies, dependencies, streams, services, windows,
// ${...}), that faults and windows lie inside the run and user windows do
// not overlap, that rates, ratios and percentiles are in range, that each
// fault and assertion carries only the keys of its type, and that probes
// obey Kubernetes' rules (liveness and startup successThreshold must be 1).
// Errors name the file, line and column from [Scenario.Positions].
func (s *Scenario) Validate() error {
	v := &validator{s: s, refs: s.refTable(), vars: s.SampleVars()}
	var secrets []string
	for _, val := range s.EnvVars(os.LookupEnv) {
		secrets = append(secrets, val)
	}
	v.errs.rd = s.Redactor(secrets...)
	v.metadata()
	v.environment()
	v.timeline()
	v.dependencies()
	v.toxiproxy()
	v.proxies()
	v.services()
	v.streams()
	v.load()
	v.faults()
	v.observers()
	v.stopConditions()
	v.assertions()
	v.claims()
	v.compare()
	v.redaction()
	v.references()
	return v.errs.err(s.File)
}

type validator struct {
	s    *Scenario
	errs errorList
	refs map[string]map[string][]string
	vars map[string]string
	// compose is the Compose file of a compose environment, once
	// composeEnv read it (nil before, or when it did not load).
	compose *composefile.Project
}

// errorf records a problem at path, located at the nearest position known
// for path or one of its parents.
func (v *validator) errorf(path, format string, args ...any) {
	e := &Error{File: v.s.File, Path: path, Msg: fmt.Sprintf(format, args...)}
	if p, ok := v.s.position(path); ok {
		e.Line, e.Column = p.Line, p.Column
		if p.File != "" {
			e.File = p.File
		}
	}
	v.errs.add(e)
}

// position finds the position of path or its nearest parent.
func (s *Scenario) position(path string) (Position, bool) {
	for path != "" {
		if p, ok := s.Positions[path]; ok {
			return p, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return Position{}, false
}

// Position returns where the value at path (e.g. "faults[0].latency") was
// written, or the nearest parent's position; ok is false when unknown.
func (s *Scenario) Position(path string) (pos Position, ok bool) { return s.position(path) }

func oneOf(got string, known []string) bool {
	for _, k := range known {
		if k == got {
			return true
		}
	}
	return false
}

// unknownValue formats an unknown-enum message with the sorted known list.
func unknownValue(what, got string, known []string) string {
	k := append([]string(nil), known...)
	sort.Strings(k)
	return fmt.Sprintf("unknown %s %q; known: %s", what, got, strings.Join(k, ", "))
}

// unique reports duplicate names and names that break references.
func (v *validator) unique(kind string, names []string, paths func(i int) string) map[string]int {
	seen := map[string]int{}
	for i, n := range names {
		p := paths(i) + ".name"
		switch {
		case n == "":
			v.errorf(p, "name is required")
			continue
		case !nameRE.MatchString(n):
			v.errorf(p, "invalid %s name %q: use letters, digits, '-' and '_' (at most 63, starting and ending with a letter or digit)", kind, n)
		}
		if j, dup := seen[n]; dup {
			v.errorf(p, "duplicate %s name %q (also %s)", kind, n, paths(j))
			continue
		}
		seen[n] = i
	}
	return seen
}

func (v *validator) metadata() {
	n := v.s.Metadata.Name
	switch {
	case n == "":
		v.errorf("metadata.name", "name is required")
	case !dnsLabelRE.MatchString(n):
		v.errorf("metadata.name", "invalid name %q: use lower-case letters, digits and '-' (at most 63, starting and ending with a letter or digit)", n)
	}
}

func (v *validator) environment() {
	e := v.s.Environment
	if e.Compose != nil && e.Type != EnvCompose {
		v.errorf("environment.compose", "applies only to environment type compose")
	}
	switch e.Type {
	case EnvLocal:
		if e.Kubernetes != nil {
			v.errorf("environment.kubernetes", "applies only to environment type kubernetes")
		}
		if e.Local != nil && e.Local.SUTPriority != "" && !oneOf(string(e.Local.SUTPriority), SUTPriorities) {
			v.errorf("environment.local.sutPriority", "%s", unknownValue("sutPriority", string(e.Local.SUTPriority), SUTPriorities))
		}
	case EnvKubernetes:
		if e.Local != nil {
			v.errorf("environment.local", "applies only to environment type local")
		}
		if e.Kubernetes == nil || len(e.Kubernetes.AllowedContexts) == 0 {
			v.errorf("environment", "a kubernetes environment must list the contexts a run may use in environment.kubernetes.allowedContexts (drill refuses any other)")
			break
		}
		for i, c := range e.Kubernetes.AllowedContexts {
			if strings.TrimSpace(c) == "" {
				v.errorf(fmt.Sprintf("environment.kubernetes.allowedContexts[%d]", i), "context name is empty")
			}
		}
		if ns := e.Kubernetes.Namespace; ns != "" && !oneOf(ns, e.Kubernetes.AllowedNamespaces) {
			v.errorf("environment.kubernetes.namespace", "namespace %q is not in allowedNamespaces (%s)", ns, strings.Join(e.Kubernetes.AllowedNamespaces, ", "))
		}
		for i, ns := range e.Kubernetes.AllowedNamespaces {
			if !dnsLabelRE.MatchString(ns) {
				v.errorf(fmt.Sprintf("environment.kubernetes.allowedNamespaces[%d]", i), "invalid namespace %q", ns)
			}
		}
	case EnvCompose:
		v.composeEnv()
	default:
		v.errorf("environment.type", "%s", unknownValue("environment type", string(e.Type), EnvironmentTypes))
	}
}

func (v *validator) timeline() {
	t := v.s.Timeline
	if t.Duration.D() <= 0 {
		v.errorf("timeline.duration", "duration must be above 0")
		return
	}
	if t.Duration.D() > MaxRunDuration {
		v.errorf("timeline.duration", "duration %s is longer than drill's limit of %s for one run; split a longer soak into several runs", t.Duration.D(), MaxRunDuration)
		return
	}
	if t.Warmup.D() >= t.Duration.D() {
		v.errorf("timeline.warmup", "warmup (%s) must end before the run does (duration %s)", t.Warmup.D(), t.Duration.D())
	}
	names := make([]string, len(t.Windows))
	for i, w := range t.Windows {
		names[i] = w.Name
	}
	v.unique("window", names, func(i int) string { return fmt.Sprintf("timeline.windows[%d]", i) })
	for i, w := range t.Windows {
		p := fmt.Sprintf("timeline.windows[%d]", i)
		if w.Name == WindowRun || w.Name == WindowBaseline {
			v.errorf(p+".name", "window name %q is reserved (drill defines run, baseline, fault:<name> and recovery:<name>)", w.Name)
		}
		switch {
		case w.To.D() <= w.From.D():
			v.errorf(p+".to", "window ends (%s) at or before it starts (%s)", w.To.D(), w.From.D())
		case w.From.D() < t.Warmup.D():
			v.errorf(p+".from", "window starts (%s) inside the warmup (%s); windows exclude the warmup", w.From.D(), t.Warmup.D())
		case w.To.D() > t.Duration.D():
			v.errorf(p+".to", "window ends (%s) after the run (duration %s)", w.To.D(), t.Duration.D())
		}
	}
	// User windows must not overlap each other.
	idx := make([]int, len(t.Windows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return t.Windows[idx[a]].From.D() < t.Windows[idx[b]].From.D() })
	for k := 1; k < len(idx); k++ {
		prev, cur := t.Windows[idx[k-1]], t.Windows[idx[k]]
		if cur.From.D() < prev.To.D() && prev.To.D() > prev.From.D() && cur.To.D() > cur.From.D() {
			v.errorf(fmt.Sprintf("timeline.windows[%d]", idx[k]), "window %q [%s, %s) overlaps window %q [%s, %s)",
				cur.Name, cur.From.D(), cur.To.D(), prev.Name, prev.From.D(), prev.To.D())
		}
	}
}

func (v *validator) dependencies() {
	s := v.s
	names := make([]string, len(s.Dependencies))
	for i, d := range s.Dependencies {
		names[i] = d.Name
	}
	v.unique("dependency", names, func(i int) string { return fmt.Sprintf("dependencies[%d]", i) })
	if s.Environment.Type == EnvKubernetes && len(s.Dependencies) > 0 {
		v.errorf("dependencies", "dependencies are started locally and apply only to environment type local")
	}
	for i, d := range s.Dependencies {
		p := fmt.Sprintf("dependencies[%d]", i)
		if (d.Postgres == nil) == (d.HTTPStub == nil) {
			v.errorf(p, "set exactly one of postgres or httpStub")
		}
		if pg := d.Postgres; pg != nil {
			if !oneOf(string(pg.Mode), PostgresModes) {
				v.errorf(p+".postgres.mode", "%s", unknownValue("postgres mode", string(pg.Mode), PostgresModes))
			}
			if pg.MaxConnections < 1 {
				v.errorf(p+".postgres.maxConnections", "maxConnections must be at least 1")
			}
			if !nameRE.MatchString(pg.Database) {
				v.errorf(p+".postgres.database", "invalid database name %q", pg.Database)
			}
			if !nameRE.MatchString(pg.User) {
				v.errorf(p+".postgres.user", "invalid user name %q", pg.User)
			}
		}
		if h := d.HTTPStub; h != nil && (h.Status < 100 || h.Status > 599) {
			v.errorf(p+".httpStub.status", "status %d is not an HTTP status (100-599)", h.Status)
		}
	}
}

func (v *validator) toxiproxy() {
	u := v.s.Toxiproxy.URL
	if u == "" {
		if v.s.Environment.Type == EnvKubernetes && len(v.s.Faults) > 0 {
			v.errorf("toxiproxy.url", "a kubernetes environment injects faults through a remote Toxiproxy; set toxiproxy.url (e.g. http://toxiproxy.staging:8474)")
		}
		return
	}
	v.checkURL("toxiproxy.url", u)
}

func (v *validator) proxies() {
	s := v.s
	names := make([]string, len(s.Proxies))
	for i, p := range s.Proxies {
		names[i] = p.Name
	}
	v.unique("proxy", names, func(i int) string { return fmt.Sprintf("proxies[%d]", i) })
	for i, p := range s.Proxies {
		path := fmt.Sprintf("proxies[%d]", i)
		v.checkHostPort(path+".listen", p.Listen)
		if p.Upstream == "" {
			v.errorf(path+".upstream", "upstream is required (host:port, e.g. ${dependencies.postgres.addr})")
		} else {
			v.checkHostPort(path+".upstream", p.Upstream)
		}
	}
}

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
		v.probe(p+".probes.startupProbe", "startup", svc.Probes.StartupProbe)
		v.probe(p+".probes.livenessProbe", "liveness", svc.Probes.LivenessProbe)
		v.probe(p+".probes.readinessProbe", "readiness", svc.Probes.ReadinessProbe)
	}
}

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

func (v *validator) streams() {
	s := v.s
	names := make([]string, len(s.Streams))
	for i, st := range s.Streams {
		names[i] = st.Name
	}
	v.unique("stream", names, func(i int) string { return fmt.Sprintf("streams[%d]", i) })
	end := s.Timeline.Duration.D()
	for i := range s.Streams {
		st := &s.Streams[i]
		p := fmt.Sprintf("streams[%d]", i)
		if len(st.Targets) == 0 && st.TargetsFile == nil {
			v.errorf(p, "a stream needs targets or targetsFile")
		}
		if len(st.Targets) > 0 && st.TargetsFile != nil {
			v.errorf(p+".targetsFile", "set targets or targetsFile, not both")
		}
		for j, t := range st.Targets {
			tp := fmt.Sprintf("%s.targets[%d]", p, j)
			if !tokenRE.MatchString(t.Method) {
				v.errorf(tp+".method", "invalid HTTP method %q", t.Method)
			}
			if t.URL == "" {
				v.errorf(tp+".url", "url is required")
			} else {
				v.checkURL(tp+".url", t.URL)
			}
			for k := range t.Headers {
				if !tokenRE.MatchString(k) {
					v.errorf(mapKeyPath(tp+".headers", k), "invalid header name %q", k)
				}
				if st.BasicAuth != nil && strings.EqualFold(k, "Authorization") {
					v.errorf(mapKeyPath(tp+".headers", k), "the stream's basicAuth sets Authorization; drop this header or basicAuth")
				}
			}
			if t.Body != "" {
				if msg := checkBodyTemplate(t.Body); msg != "" {
					v.errorf(tp+".body", "%s", msg)
				}
			}
		}
		if ba := st.BasicAuth; ba != nil {
			if ba.Username == "" {
				v.errorf(p+".basicAuth.username", "username is required (it may use ${env.NAME})")
			} else if strings.Contains(ba.Username, ":") {
				v.errorf(p+".basicAuth.username", "a basic auth username must not contain ':' (RFC 7617)")
			}
		}
		if tf := st.TargetsFile; tf != nil {
			if tf.Path == "" {
				v.errorf(p+".targetsFile.path", "path is required")
			}
			if !oneOf(tf.Format, TargetsFormats) {
				v.errorf(p+".targetsFile.format", "%s", unknownValue("targets format", tf.Format, TargetsFormats))
			}
		}
		shapes := 0
		if st.Rate != nil {
			shapes++
			if st.Rate.Freq <= 0 {
				v.errorf(p+".rate", "rate must be above 0 (e.g. 2800/s), got %s", st.Rate)
			}
			v.rateBound(p+".rate", *st.Rate)
		}
		if st.Ramp != nil {
			shapes++
			if st.Ramp.From.Per == 0 {
				v.errorf(p+".ramp.from", "from is required (e.g. 100/s)")
			}
			if st.Ramp.To.Freq <= 0 && st.Ramp.From.Freq <= 0 {
				v.errorf(p+".ramp", "a ramp must reach a rate above 0")
			}
			v.rateBound(p+".ramp.from", st.Ramp.From)
			v.rateBound(p+".ramp.to", st.Ramp.To)
		}
		if len(st.Steps) > 0 {
			shapes++
			var sum time.Duration
			for j, step := range st.Steps {
				sp := fmt.Sprintf("%s.steps[%d]", p, j)
				if step.Rate.Freq <= 0 {
					v.errorf(sp+".rate", "rate must be above 0 (e.g. 200/s), got %s", step.Rate)
				}
				v.rateBound(sp+".rate", step.Rate)
				if step.For.D() <= 0 {
					v.errorf(sp+".for", "for must be above 0")
				}
				sum += step.For.D()
			}
			if st.Duration.D() != sum {
				v.errorf(p+".duration", "duration (%s) must equal the sum of the steps (%s); leave it out", st.Duration.D(), sum)
			}
		}
		if shapes != 1 {
			v.errorf(p, "set exactly one of rate, ramp or steps (has %d)", shapes)
		}
		if st.Start.D() >= end {
			v.errorf(p+".start", "stream starts (%s) at or after the end of the run (%s)", st.Start.D(), end)
		} else if st.Duration.D() <= 0 {
			v.errorf(p+".duration", "duration must be above 0")
		} else if st.Start.D()+st.Duration.D() > end {
			where := p + ".duration"
			if _, wrote := v.s.Positions[where]; !wrote && len(st.Steps) > 0 {
				where = p + ".steps"
			}
			v.errorf(where, "stream ends (%s) after the run (duration %s)", st.Start.D()+st.Duration.D(), end)
		}
		if st.Timeout.D() <= 0 {
			v.errorf(p+".timeout", "timeout must be above 0")
		}
		if st.MaxConnections < 0 {
			v.errorf(p+".maxConnections", "must not be negative")
		}
		if st.MaxWorkers < 0 {
			v.errorf(p+".maxWorkers", "must not be negative")
		} else if st.MaxWorkers > MaxStreamWorkers {
			v.errorf(p+".maxWorkers", "maxWorkers %d is above drill's limit of %d concurrent requests per stream", st.MaxWorkers, MaxStreamWorkers)
		}
		if r := st.Retry; r != nil {
			if !oneOf(string(r.Policy), RetryPolicies) {
				v.errorf(p+".retry.policy", "%s", unknownValue("retry policy", string(r.Policy), RetryPolicies))
			}
			if r.MaxAttempts < 0 || r.MaxAttempts > 100 {
				v.errorf(p+".retry.maxAttempts", "maxAttempts must be between 1 and 100, got %d", r.MaxAttempts)
			}
			for j, c := range r.On {
				if c < 100 || c > 599 {
					v.errorf(fmt.Sprintf("%s.retry.on[%d]", p, j), "status %d is not an HTTP status (100-599)", c)
				}
			}
		}
		if m := st.MaxConnectionErrors; m != nil && !(*m >= 0 && *m <= 1) {
			v.errorf(p+".maxConnectionErrors", "maxConnectionErrors must be between 0 and 1, got %v", *m)
		}
		if lb := st.LagBudget; lb != nil && !(lb.Fraction >= 0 && lb.Fraction <= 1) {
			v.errorf(p+".lagBudget.fraction", "fraction must be between 0 and 1, got %v", lb.Fraction)
		}
	}
}

// rateBound refuses a rate above MaxStreamRate at field.
func (v *validator) rateBound(field string, r Rate) {
	if r.PerSecond() > MaxStreamRate {
		v.errorf(field, "rate %s (%.4g/s) is above drill's limit of %d/s per stream", r, r.PerSecond(), MaxStreamRate)
	}
}

// bodyData mirrors the fields a body template may use ({{.ID}}, {{.Seq}},
// {{.Time}}).
var bodyFields = []string{"ID", "Seq", "Time"}

// checkBodyTemplate parses a body template and checks the fields it uses.
func checkBodyTemplate(body string) string {
	t, err := template.New("body").Option("missingkey=error").Parse(body)
	if err != nil {
		return "invalid body template: " + strings.TrimPrefix(err.Error(), "template: ")
	}
	var bad string
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		if n == nil || bad != "" {
			return
		}
		switch x := n.(type) {
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(x.Pipe)
		case *parse.PipeNode:
			if x == nil {
				return
			}
			for _, c := range x.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			for _, a := range x.Args {
				walk(a)
			}
		case *parse.FieldNode:
			if len(x.Ident) > 0 && !oneOf(x.Ident[0], bodyFields) {
				bad = fmt.Sprintf("body template uses {{.%s}}; known: {{.ID}}, {{.Seq}}, {{.Time}}", x.Ident[0])
			}
		case *parse.IfNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.RangeNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.WithNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.TemplateNode:
			walk(x.Pipe)
		}
	}
	if t.Tree != nil {
		walk(t.Tree.Root)
	}
	return bad
}

func (v *validator) faults() {
	s := v.s
	names := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		names[i] = f.Name
	}
	v.unique("fault", names, func(i int) string { return fmt.Sprintf("faults[%d]", i) })
	proxies := map[string]bool{}
	for _, p := range s.Proxies {
		proxies[p.Name] = true
	}
	deps := map[string]*Dependency{}
	for i := range s.Dependencies {
		deps[s.Dependencies[i].Name] = &s.Dependencies[i]
	}
	t := s.Timeline
	for i := range s.Faults {
		f := &s.Faults[i]
		p := fmt.Sprintf("faults[%d]", i)
		sp, known := FaultSpecOf(f.Type)
		report := func(key, msg string) {
			if key == "" {
				v.errorf(p, "%s", msg)
				return
			}
			v.errorf(p+"."+key, "%s", msg)
		}
		checkFault(f, report)
		if !known {
			continue
		}
		// What checkFault cannot see: whether the target exists (a missing
		// one was reported), the kind's rules about it, the environment.
		target, exists := f.Proxy, proxies[f.Proxy]
		if sp.Target == TargetDependency {
			target, exists = f.Dependency, deps[f.Dependency] != nil || v.composeTarget(f)
		}
		switch {
		case target == "":
		case !exists && sp.Target == TargetProxy:
			v.errorf(p+".proxy", "no proxy named %q%s", f.Proxy, knownNames(mapKeys(proxies)))
		case !exists:
			v.errorf(p+".dependency", "no dependency named %q%s", f.Dependency, knownNames(depNames(s)))
		case sp.CheckTarget != nil:
			sp.CheckTarget(s, f, report)
		}
		if sp.Target == TargetDependency && s.Environment.Type == EnvKubernetes {
			v.errorf(p+".type", "%s faults act on local dependencies; use a toxic or down on a proxy in a kubernetes environment", f.Type)
		}
		if f.ManualStart || f.ManualEnd {
			v.validateManual(p, *f)
			continue
		}
		switch on, off := f.At.D(), f.At.D()+f.For.D(); {
		case f.For.D() <= 0:
			v.errorf(p+".for", "for must be above 0")
		case on < t.Warmup.D():
			v.errorf(p+".at", "fault starts (%s) inside the warmup (%s); start it at or after the warmup", on, t.Warmup.D())
		case off > t.Duration.D():
			v.errorf(p+".for", "fault ends (%s) after the run (duration %s)", off, t.Duration.D())
		}
	}
}

// article returns "an" or "a" for word.
func article(word string) string {
	// "u" is "an" before a vowel sound (unroutable) and "a" before a "you"
	// sound (url): drill's kinds starting with u are of the first kind.
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func depNames(s *Scenario) []string {
	var out []string
	for _, d := range s.Dependencies {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

func knownNames(names []string) string {
	if len(names) == 0 {
		return "; none are defined"
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return "; known: " + strings.Join(sorted, ", ")
}

func (v *validator) observers() {
	s := v.s
	o := s.Observers
	var names []string
	var paths []string
	add := func(kind string, i int, name string) {
		names = append(names, name)
		paths = append(paths, fmt.Sprintf("observers.%s[%d]", kind, i))
	}
	for i, x := range o.Pods {
		add("pods", i, x.Name)
	}
	for i, x := range o.EndpointSlices {
		add("endpointSlices", i, x.Name)
	}
	for i, x := range o.Probes {
		add("probes", i, x.Name)
	}
	for i, x := range o.Metrics {
		add("metrics", i, x.Name)
	}
	for i, x := range o.PromQL {
		add("promql", i, x.Name)
	}
	v.unique("observer", names, func(i int) string { return paths[i] })
	local := s.Environment.Type == EnvLocal
	for i, x := range o.Pods {
		p := fmt.Sprintf("observers.pods[%d]", i)
		if local {
			v.errorf(p, "pod observers need environment type kubernetes; the local runtime reports its replicas itself")
		}
		if x.Selector == "" {
			v.errorf(p+".selector", "selector is required (e.g. app=order-gateway)")
		}
		v.checkNamespace(p+".namespace", x.Namespace)
	}
	for i, x := range o.EndpointSlices {
		p := fmt.Sprintf("observers.endpointSlices[%d]", i)
		if local {
			v.errorf(p, "endpointSlice observers need environment type kubernetes; the local service proxy reports its endpoints itself")
		}
		if x.Service == "" {
			v.errorf(p+".service", "service is required")
		}
		v.checkNamespace(p+".namespace", x.Namespace)
	}
	for i, x := range o.Probes {
		p := fmt.Sprintf("observers.probes[%d]", i)
		v.checkURL(p+".url", x.URL)
		if x.Interval.D() <= 0 {
			v.errorf(p+".interval", "interval must be above 0")
		}
		if x.Timeout.D() <= 0 {
			v.errorf(p+".timeout", "timeout must be above 0")
		}
	}
	for i, x := range o.Metrics {
		p := fmt.Sprintf("observers.metrics[%d]", i)
		v.checkURL(p+".url", x.URL)
		if x.Interval.D() <= 0 {
			v.errorf(p+".interval", "interval must be above 0")
		}
		for j, m := range x.Metrics {
			if !metricRE.MatchString(m) {
				v.errorf(fmt.Sprintf("%s.metrics[%d]", p, j), "invalid metric name %q", m)
			}
		}
	}
	for i, x := range o.PromQL {
		p := fmt.Sprintf("observers.promql[%d]", i)
		v.checkURL(p+".url", x.URL)
		if strings.TrimSpace(x.Query) == "" {
			v.errorf(p+".query", "query is required")
		}
		if x.Interval.D() <= 0 {
			v.errorf(p+".interval", "interval must be above 0")
		}
	}
}

// isPromQLName reports whether name is a promql observer's name (its
// series are recorded as metric events under that name).
func (v *validator) isPromQLName(name string) bool {
	for _, o := range v.s.Observers.PromQL {
		if o.Name == name {
			return true
		}
	}
	return false
}

func (v *validator) checkNamespace(p, ns string) {
	k := v.s.Environment.Kubernetes
	if ns == "" || k == nil || len(k.AllowedNamespaces) == 0 {
		return
	}
	if !oneOf(ns, k.AllowedNamespaces) {
		v.errorf(p, "namespace %q is not in environment.kubernetes.allowedNamespaces (%s)", ns, strings.Join(k.AllowedNamespaces, ", "))
	}
}

func (v *validator) streamNames() []string {
	var out []string
	for _, st := range v.s.Streams {
		out = append(out, st.Name)
	}
	return out
}

func (v *validator) serviceNames() []string {
	var out []string
	for _, svc := range v.s.Services {
		out = append(out, svc.Name)
	}
	return out
}

func (v *validator) stopConditions() {
	s := v.s
	names := make([]string, len(s.StopConditions))
	for i, c := range s.StopConditions {
		names[i] = c.Name
	}
	v.unique("stop condition", names, func(i int) string { return fmt.Sprintf("stopConditions[%d]", i) })
	streams := v.streamNames()
	for i, c := range s.StopConditions {
		p := fmt.Sprintf("stopConditions[%d]", i)
		if !oneOf(c.Stream, streams) {
			v.errorf(p+".stream", "no stream named %q%s", c.Stream, knownNames(streams))
		}
		if !(c.ErrorRateAbove > 0 && c.ErrorRateAbove <= 1) {
			v.errorf(p+".errorRateAbove", "errorRateAbove must be above 0 and at most 1, got %v", c.ErrorRateAbove)
		}
		if c.For.D() <= 0 {
			v.errorf(p+".for", "for must be above 0")
		}
		if !oneOf(string(c.Action), StopActions) {
			v.errorf(p+".action", "%s", unknownValue("stop action", string(c.Action), StopActions))
		}
	}
}

// claims checks each claim's name, service, fault, figure and times.
func (v *validator) claims() {
	faults := map[string]bool{}
	for _, f := range v.s.Faults {
		faults[f.Name] = true
	}
	services := v.serviceNames()
	seen := map[string]int{}
	for i, c := range v.s.Claims {
		p := fmt.Sprintf("claims[%d]", i)
		switch j, dup := seen[c.Name]; {
		case c.Name == "":
			v.errorf(p+".name", "a claim needs a name")
		case dup:
			v.errorf(p+".name", "duplicate claim name %q (also claims[%d])", c.Name, j)
		default:
			seen[c.Name] = i
		}
		if !oneOf(c.Service, services) {
			v.errorf(p+".service", "no service named %q%s", c.Service, knownNames(services))
		}
		if !faults[c.Fault] {
			v.errorf(p+".fault", "no fault named %q%s", c.Fault, knownNames(mapKeys(faults)))
		}
		if !oneOf(string(c.Figure), ClaimFigures) {
			v.errorf(p+".figure", "%s", unknownValue("claim figure", string(c.Figure), ClaimFigures))
		}
		if c.Value.D() < 0 {
			v.errorf(p+".value", "value must not be negative")
		}
		if c.Tolerance != nil && c.Tolerance.D() < 0 {
			v.errorf(p+".tolerance", "tolerance must not be negative")
		}
	}
}

// references checks every ${...} in every string value of the scenario.
func (v *validator) references() {
	walkStrings(reflect.ValueOf(v.s).Elem(), "", func(path, s string) {
		if !strings.Contains(s, "$") {
			return
		}
		refs, err := Refs(s)
		if err != nil {
			v.errorf(path, "%s", err.Error())
			return
		}
		for _, r := range refs {
			if msg := v.s.checkRef(r.Key, v.refs); msg != "" {
				v.errorf(path, "%s", msg)
			}
		}
	})
}

// walkStrings calls fn for every string reachable from v (struct fields by
// YAML key, slices, string maps), with its field path.
func walkStrings(v reflect.Value, path string, fn func(path, s string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, fn)
		}
	case reflect.Struct:
		si := infoFor(v.Type())
		for _, f := range si.fields {
			walkStrings(v.Field(f.index), joinPath(path, f.name), fn)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			walkStrings(v.MapIndex(k), mapKeyPath(path, k.String()), fn)
		}
	case reflect.String:
		fn(path, v.String())
	}
}

// expandSample expands s with sample values; ok is false when s has a bad
// reference (reported by references()).
func (v *validator) expandSample(s string) (string, bool) {
	out, err := Expand(s, v.vars)
	return out, err == nil
}

// checkURL checks an absolute http(s) URL (after sample expansion).
func (v *validator) checkURL(p, raw string) {
	if raw == "" {
		v.errorf(p, "url is required")
		return
	}
	s, ok := v.expandSample(raw)
	if !ok {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf(p, "url %q must be an absolute http:// or https:// URL", raw)
	}
}

// checkHostPort checks host:port (after sample expansion).
func (v *validator) checkHostPort(p, raw string) {
	s, ok := v.expandSample(raw)
	if !ok {
		return
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		v.errorf(p, "address %q must be host:port (e.g. 127.0.0.1:0)", raw)
	}
}

// compare checks the margins of the compare section.
func (v *validator) compare() {
	c := v.s.Compare
	if c == nil {
		return
	}
	for _, m := range []struct {
		key string
		val *float64
		max float64
	}{{"p99Increase", c.P99Increase, 0}, {"errorRateIncrease", c.ErrorRateIncrease, 1}, {"recoveryIncrease", c.RecoveryIncrease, 0}} {
		if m.val == nil {
			continue
		}
		if *m.val < 0 || (m.max > 0 && *m.val > m.max) {
			bound := "at least 0"
			if m.max > 0 {
				bound = fmt.Sprintf("between 0 and %v", m.max)
			}
			v.errorf("compare."+m.key, "%s must be %s, got %v", m.key, bound, *m.val)
		}
	}
	for _, m := range []struct {
		key string
		val *Duration
	}{{"p99Slack", c.P99Slack}, {"recoverySlack", c.RecoverySlack}} {
		if m.val != nil && m.val.D() < 0 {
			v.errorf("compare."+m.key, "%s must not be negative, got %s", m.key, m.val.D())
		}
	}
}
