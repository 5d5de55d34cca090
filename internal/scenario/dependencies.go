package scenario

import (
	"fmt"
	"slices"
	"sort"
)

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
	// Empty: drill runs a Toxiproxy server of its own on loopback, in a process of its own.
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

// Known values of enumerated fields, sorted; used in hints and the schema.
var (
	PostgresModes = []string{string(PostgresAuto), string(PostgresBinaries), string(PostgresContainer)}
)

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
		if v.s.Environment.Type == EnvKubernetes && slices.ContainsFunc(v.s.Faults, func(f Fault) bool { return f.Proxy != "" }) {
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

func depNames(s *Scenario) []string {
	var out []string
	for _, d := range s.Dependencies {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}
