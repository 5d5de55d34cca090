package composefile

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Traefik's Docker-provider labels, the subset drill reads to know the
// routers (which Compose service a request no router matched was meant
// for, and the routers named in the plan); the Compose file's own Traefik
// does the routing. Labels read:
//
//	traefik.enable                                   true/false (default true: exposedByDefault)
//	traefik.http.routers.R.rule                      Host, PathPrefix, Path matchers; && || and ( )
//	traefik.http.routers.R.service                   the service R sends to (default: the only one defined)
//	traefik.http.routers.R.priority                  integer (default: the rule's length)
//	traefik.http.routers.R.entrypoints               accepted and ignored (Traefik reads them)
//	traefik.http.services.S.loadbalancer.server.port the container port (required)
//	traefik.docker.network                           accepted and ignored: one project network
//
// Any other traefik.* label is refused by name.

// Router is one Traefik HTTP router read from a container's labels.
type Router struct {
	// Name is the router's name (R), Owner the Compose service whose labels
	// define it.
	Name, Owner string
	// Rule is the rule as written; match is its parsed form.
	Rule  string
	match matcher
	// Service is the Traefik service it sends to.
	Service string
	// Priority orders routers: higher first (Traefik's default is the
	// rule's length).
	Priority int
}

// Backend is one Traefik service defined on a container's labels: the
// container (Owner) is its server on Port.
type Backend struct {
	Name, Owner string
	Port        int
}

// Routes are the routers and services of a project's labels.
type Routes struct {
	Routers  []Router
	Backends []Backend
}

// Matches reports whether the router's rule matches r.
func (rt Router) Matches(r *http.Request) bool { return rt.match(r) }

// ParseRoutes reads the traefik.* labels of every service of p. Errors name
// the service and the label; a label outside drill's subset wraps
// [ErrUnsupported].
func ParseRoutes(p *Project) (*Routes, error) {
	out := &Routes{}
	for _, s := range p.Services {
		if err := out.add(s); err != nil {
			return nil, fmt.Errorf("services.%s.labels: %w", s.Name, err)
		}
	}
	// Traefik drops a router whose service no container defines (every
	// request for it would get 404, not the 503 of an empty service);
	// drill refuses it rather than routing to nothing.
	defined := map[string]bool{}
	for _, b := range out.Backends {
		defined[b.Name] = true
	}
	for _, r := range out.Routers {
		if !defined[r.Service] {
			return nil, fmt.Errorf("services.%s.labels: traefik.http.routers.%s.service: no container defines the Traefik service %q (traefik.http.services.%s.loadbalancer.server.port)", r.Owner, r.Name, r.Service, r.Service)
		}
	}
	sort.SliceStable(out.Routers, func(i, j int) bool {
		if out.Routers[i].Priority != out.Routers[j].Priority {
			return out.Routers[i].Priority > out.Routers[j].Priority
		}
		return out.Routers[i].Name < out.Routers[j].Name
	})
	return out, nil
}

func (rs *Routes) add(s Service) error {
	if v, ok := s.Labels["traefik.enable"]; ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("traefik.enable: %q is not true or false", v)
		}
		if !on {
			return nil
		}
	}
	routers := map[string]*Router{}
	backends := map[string]*Backend{}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := s.Labels[k]
		if !strings.HasPrefix(k, "traefik.") || k == "traefik.enable" || k == "traefik.docker.network" {
			continue
		}
		parts := strings.Split(k, ".")
		switch {
		case len(parts) == 5 && parts[1] == "http" && parts[2] == "routers":
			r := routers[parts[3]]
			if r == nil {
				r = &Router{Name: parts[3], Owner: s.Name, Priority: -1}
				routers[parts[3]] = r
			}
			switch parts[4] {
			case "rule":
				m, err := parseRule(v)
				if err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
				r.Rule, r.match = v, m
			case "service":
				r.Service = v
			case "priority":
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("%s: %q is not an integer", k, v)
				}
				r.Priority = n
			case "entrypoints":
			default:
				return fmt.Errorf("%s: %w (routers take rule, service, priority, entrypoints)", k, ErrUnsupported)
			}
		case len(parts) == 7 && parts[1] == "http" && parts[2] == "services" &&
			parts[4] == "loadbalancer" && parts[5] == "server" && parts[6] == "port":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%s: %q is not a port", k, v)
			}
			backends[parts[3]] = &Backend{Name: parts[3], Owner: s.Name, Port: n}
		default:
			return fmt.Errorf("%s: %w (drill follows traefik.enable, traefik.http.routers.R.{rule,service,priority,entrypoints}, traefik.http.services.S.loadbalancer.server.port)", k, ErrUnsupported)
		}
	}
	if len(routers) > 0 && len(backends) == 0 {
		return fmt.Errorf("traefik.http.services.<name>.loadbalancer.server.port is required: drill does not guess the container's port")
	}
	names := make([]string, 0, len(routers))
	for n := range routers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := routers[n]
		if r.match == nil {
			return fmt.Errorf("traefik.http.routers.%s.rule is required (drill does not apply a default rule)", n)
		}
		if r.Service == "" {
			if len(backends) != 1 {
				return fmt.Errorf("traefik.http.routers.%s.service: name the service (the container defines %d)", n, len(backends))
			}
			for b := range backends {
				r.Service = b
			}
		}
		if r.Priority < 0 {
			r.Priority = len(r.Rule)
		}
		rs.Routers = append(rs.Routers, *r)
	}
	bn := make([]string, 0, len(backends))
	for n := range backends {
		bn = append(bn, n)
	}
	sort.Strings(bn)
	for _, n := range bn {
		rs.Backends = append(rs.Backends, *backends[n])
	}
	return nil
}

// matcher is a parsed rule.
type matcher func(*http.Request) bool

// parseRule parses a Traefik rule: Host(`a`), PathPrefix(`/p`),
// Path(`/p`) joined by && and ||, with parentheses.
func parseRule(s string) (matcher, error) {
	p := &ruleParser{s: s}
	m, err := p.or()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("rule %q: unexpected %q at offset %d", s, p.s[p.i:], p.i)
	}
	return m, nil
}

type ruleParser struct {
	s string
	i int
}

func (p *ruleParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *ruleParser) eat(tok string) bool {
	p.space()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *ruleParser) or() (matcher, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.eat("||") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		a, b := l, r
		l = func(q *http.Request) bool { return a(q) || b(q) }
	}
	return l, nil
}

func (p *ruleParser) and() (matcher, error) {
	l, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.eat("&&") {
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		a, b := l, r
		l = func(q *http.Request) bool { return a(q) && b(q) }
	}
	return l, nil
}

func (p *ruleParser) term() (matcher, error) {
	if p.eat("(") {
		m, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, fmt.Errorf("rule %q: missing ) at offset %d", p.s, p.i)
		}
		return m, nil
	}
	p.space()
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z') {
		p.i++
	}
	name := p.s[start:p.i]
	if name == "" {
		return nil, fmt.Errorf("rule %q: expected a matcher at offset %d", p.s, start)
	}
	if !p.eat("(") {
		return nil, fmt.Errorf("rule %q: expected ( after %s", p.s, name)
	}
	var args []string
	for {
		p.space()
		if p.i >= len(p.s) || (p.s[p.i] != '`' && p.s[p.i] != '"') {
			return nil, fmt.Errorf("rule %q: %s takes quoted arguments (`...`)", p.s, name)
		}
		q := p.s[p.i]
		end := strings.IndexByte(p.s[p.i+1:], q)
		if end < 0 {
			return nil, fmt.Errorf("rule %q: unterminated argument of %s", p.s, name)
		}
		args = append(args, p.s[p.i+1:p.i+1+end])
		p.i += end + 2
		if !p.eat(",") {
			break
		}
	}
	if !p.eat(")") {
		return nil, fmt.Errorf("rule %q: missing ) after the arguments of %s", p.s, name)
	}
	switch name {
	case "Host":
		return func(r *http.Request) bool {
			h := r.Host
			if hh, _, err := net.SplitHostPort(h); err == nil {
				h = hh
			}
			for _, x := range args {
				if strings.EqualFold(h, x) {
					return true
				}
			}
			return false
		}, nil
	case "PathPrefix":
		return func(r *http.Request) bool {
			for _, a := range args {
				if strings.HasPrefix(r.URL.Path, a) {
					return true
				}
			}
			return false
		}, nil
	case "Path":
		return func(r *http.Request) bool {
			for _, a := range args {
				if r.URL.Path == a {
					return true
				}
			}
			return false
		}, nil
	default:
		return nil, fmt.Errorf("rule %q: matcher %s %w (drill follows Host, PathPrefix and Path)", p.s, name, ErrUnsupported)
	}
}

// TraefikStatic is what drill reads of a Traefik service's static
// configuration, from its command's --flag=value arguments (Traefik's CLI
// form; flag names compare without case, as Traefik's do). Configuration
// from a file or TRAEFIK_* variables is not read: drill requires the
// flags below on the command line, where the Compose file shows them.
type TraefikStatic struct {
	// EntryPoints maps an entry point's name to its container port
	// (--entrypoints.NAME.address=:PORT).
	EntryPoints map[string]int
	// APIPort is the container port of the insecure API
	// (--api.insecure=true serves it on entry point "traefik", :8080 unless
	// --entrypoints.traefik.address says otherwise); 0 when the API is off.
	APIPort int
	// DockerProvider says --providers.docker=true (or any providers.docker.* flag).
	DockerProvider bool
	// AllowEmptyServices is --providers.docker.allowEmptyServices: a
	// service whose containers are all unhealthy keeps its routers, which
	// answer 503, instead of losing them (404).
	AllowEmptyServices bool
	// AccessLogJSON says the access log is on, in JSON, on the container's
	// standard output, unbuffered: --accesslog=true and
	// --accesslog.format=json, with no --accesslog.filepath and no
	// --accesslog.bufferingsize above 0.
	AccessLogJSON bool
}

// ParseTraefikStatic reads s's command as Traefik's static configuration
// flags. It returns an error naming the flag when a value drill reads is
// not what Traefik accepts (a bool that is not one, an address without a
// port). Flags drill does not read are left to Traefik.
func ParseTraefikStatic(s Service) (*TraefikStatic, error) {
	out := &TraefikStatic{EntryPoints: map[string]int{}}
	flags := map[string]string{}
	for _, a := range s.Command {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		k, v, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue {
			v = "true"
		}
		flags[strings.ToLower(k)] = v
	}
	boolFlag := func(k string) (bool, error) {
		v, ok := flags[k]
		if !ok {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("services.%s.command: --%s=%s is not true or false", s.Name, k, v)
		}
		return b, nil
	}
	var err error
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, "entrypoints.")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, ".address")
		if !ok || strings.Contains(name, ".") {
			continue
		}
		_, port, found := strings.Cut(flags[k], ":")
		port, _, _ = strings.Cut(port, "/") // :80/tcp
		n, perr := strconv.Atoi(port)
		if !found || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("services.%s.command: --%s=%s: want [host]:port", s.Name, k, flags[k])
		}
		out.EntryPoints[name] = n
	}
	insecure, err := boolFlag("api.insecure")
	if err != nil {
		return nil, err
	}
	if insecure {
		out.APIPort = 8080
		if p, ok := out.EntryPoints["traefik"]; ok {
			out.APIPort = p
		}
	}
	if out.DockerProvider, err = boolFlag("providers.docker"); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "providers.docker.") {
			out.DockerProvider = true
		}
	}
	if out.AllowEmptyServices, err = boolFlag("providers.docker.allowemptyservices"); err != nil {
		return nil, err
	}
	on, err := boolFlag("accesslog")
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "accesslog.") {
			on = true // any accesslog.* option turns it on, as in Traefik
		}
	}
	buffered := false
	if v, ok := flags["accesslog.bufferingsize"]; ok && v != "0" {
		buffered = true
	}
	_, toFile := flags["accesslog.filepath"]
	out.AccessLogJSON = on && strings.EqualFold(flags["accesslog.format"], "json") && !toFile && !buffered
	return out, nil
}
