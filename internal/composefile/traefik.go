package composefile

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Traefik's Docker provider, the subset drill follows. Labels read:
//
//	traefik.enable                                   true/false (default true: exposedByDefault)
//	traefik.http.routers.R.rule                      Host, PathPrefix, Path matchers; && || and ( )
//	traefik.http.routers.R.service                   the service R sends to (default: the only one defined)
//	traefik.http.routers.R.priority                  integer (default: the rule's length)
//	traefik.http.routers.R.entrypoints               accepted and ignored: drill's gateway is one entrypoint
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
