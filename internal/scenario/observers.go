package scenario

import (
	"fmt"
	"net/url"
	"strings"
)

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
	// Postgres polls a PostgreSQL server's pg_stat_activity: its client
	// backends per application_name and state (pool quotas, MC-PO-01;
	// leaked connections).
	Postgres []PostgresObserver `yaml:"postgres,omitempty" json:"postgres,omitempty"`
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

// PostgresObserver connects to DSN and, every Interval (default 1s),
// counts the server's client backends in pg_stat_activity (its own
// connection excluded). Each poll records metric events, all labelled job
// (the observer's Name), datname and application_name:
// pg_backends (client backends of that application, all states), and
// pg_backends_state with label state (active, idle, idle in transaction,
// ...); a series seen before and absent now is recorded as 0, and pg_up
// is 1 after a good poll and 0 after a failed one (a paused server: no
// other sample then). A metric assertion reads them like scraped ones,
// e.g. pg_backends{application_name=payment-core-auth} <= 40 (MC-PO-01).
type PostgresObserver struct {
	// Name is unique among observers; it names the recorded events (label
	// job).
	Name string `yaml:"name" json:"name"`
	// DSN is a postgres:// URL; may use ${...}, e.g.
	// ${dependencies.postgres.dsn} (straight to the server, not through a
	// proxy whose toxics would stall the observer); required.
	DSN string `yaml:"dsn" json:"dsn"`
	// Interval between polls; default 1s. A poll times out after
	// Interval (at least 500ms).
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
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
	for i, x := range o.Postgres {
		add("postgres", i, x.Name)
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
	for i, x := range o.Postgres {
		p := fmt.Sprintf("observers.postgres[%d]", i)
		v.checkDSN(p+".dsn", x.DSN)
		if x.Interval.D() <= 0 {
			v.errorf(p+".interval", "interval must be above 0")
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

// checkDSN checks a PostgreSQL connection URL (after sample expansion).
func (v *validator) checkDSN(p, raw string) {
	if raw == "" {
		v.errorf(p, "dsn is required (e.g. ${dependencies.postgres.dsn})")
		return
	}
	s, ok := v.expandSample(raw)
	if !ok {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		v.errorf(p, "dsn %q must be a postgres:// URL with a host (e.g. ${dependencies.postgres.dsn})", raw)
	}
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
