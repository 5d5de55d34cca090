package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/composefile"
	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/traefik"
)

// composeRun is what a compose run brought up: the project's network and
// containers, the watcher that turns the engine's view into events, and,
// when the Compose file runs Traefik, the observer that reads routing
// from it.
type composeRun struct {
	cli     *testcontainers.DockerClient
	stack   *compose.Stack
	watcher *compose.Watcher
	traefik *traefik.Observer
	// stopTraefik closes the observer once (before the record is made,
	// and at teardown for a run that ended early).
	stopTraefik func()
	// warnings are what the engine will not carry out of the Compose file
	// (file: key: why), for the record's validity warnings.
	warnings []string
	// mu guards problems: what makes the measurement invalid (Traefik's
	// API or access log unreadable), for the record's validity problems.
	mu       sync.Mutex
	problems []string
}

// problem records a reason the run's measurement is invalid.
func (cr *composeRun) problem(p ...string) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.problems = append(cr.problems, p...)
}

// Problems returns the recorded reasons the measurement is invalid.
func (cr *composeRun) Problems() []string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return append([]string(nil), cr.problems...)
}

// isCompose reports whether the run brings up a Compose file.
func (r *run) isCompose() bool { return r.sc.Environment.Type == scenario.EnvCompose }

// prepareCompose reads the Compose file, builds the images it has build
// sections for and creates the project network (journaled first), before
// the proxies start: they listen on the network's gateway so the
// containers reach them.
func (r *run) prepareCompose(ctx context.Context) error {
	c := r.sc.Environment.Compose
	cli, err := docker.Client(ctx)
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("compose environment: %w", err))
	}
	r.env.onClose("docker client", func(context.Context) error { return cli.Close() })
	// The variables are set empty for now: the proxies they name are not up
	// yet; startCompose reads the file again with their values.
	blank := make(map[string]string, len(c.Env))
	for k := range c.Env {
		blank[k] = ""
	}
	p, err := composefile.Load(ctx, r.sc.ComposePath(), c.Project, blank)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	log := r.log.With("component", "compose", "project", p.Name)
	if err := compose.BuildImages(ctx, cli, p, log); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, err)
	}
	st, err := compose.CreateNetwork(ctx, cli, p.Name, r.id, func() error {
		return r.journal.Record(inject.ComposeEntry(inject.OpApply, r.id, p.Name))
	}, log)
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("compose project %s: %w", p.Name, err))
	}
	r.env.compose = &composeRun{cli: cli, stack: st}
	r.env.onClose("compose project "+p.Name, func(ctx context.Context) error {
		if err := st.Down(ctx); err != nil {
			return err
		}
		return r.journal.Record(inject.ComposeEntry(inject.OpRevert, r.id, p.Name))
	})
	log.Info("compose network ready", "network", st.Network, "gateway", st.Gateway)
	return nil
}

// composeSecrets returns the values of the Compose file's environment
// variables that the scenario's redaction rules treat as secrets
// (redact.Redactor.SecretEnvValue: POSTGRES_PASSWORD, API_TOKEN, ..., and
// long enough values of variables no list names and the scenario does not
// allow) as the file writes them. The containers hold them, and what the
// engine reports back (healthcheck outputs, kept in probe events)
// may echo them: they are secrets of the run like ${env.NAME} values. A
// file that does not load gives none (validation reports it).
func composeSecrets(s *scenario.Scenario) []string {
	if s.Environment.Type != scenario.EnvCompose || s.Environment.Compose == nil {
		return nil
	}
	p, err := composefile.Load(context.Background(), s.ComposePath(), s.Environment.Compose.Project, nil)
	if err != nil {
		return nil
	}
	rules := s.Redactor()
	var out []string
	for _, svc := range p.Services {
		for _, kv := range svc.Env {
			if k, v, _ := strings.Cut(kv, "="); rules.SecretEnvValue(k, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// proxyListen is where proxy i listens: in a compose run, a proxy whose
// listen the scenario does not set listens on the project network's
// gateway (a port of its own), so the containers reach it.
func (r *run) proxyListen(i int, listen string) string {
	if !r.isCompose() || r.env.compose == nil {
		return listen
	}
	if _, wrote := r.sc.Positions[fmt.Sprintf("proxies[%d].listen", i)]; wrote {
		return listen
	}
	return net.JoinHostPort(r.env.compose.stack.Gateway, "0")
}

// startCompose reads the Compose file again with environment.compose.env
// filled (proxies are up now), starts the containers and the watcher, and
// points ${services.NAME.url} at Traefik's entry point when the file runs
// Traefik (environment.compose.traefik), which drill then observes, or
// else at the port the service's container publishes on loopback.
func (r *run) startCompose(ctx context.Context) error {
	c := r.sc.Environment.Compose
	cr := r.env.compose
	env, err := r.expandEnv("environment.compose.env", c.Env)
	if err != nil {
		return err
	}
	p, err := composefile.Load(ctx, r.sc.ComposePath(), cr.stack.Project.Name, env)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	routes, err := composefile.ParseRoutes(p)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w", r.sc.ComposePath(), err))
	}
	var ts *scenario.TraefikSetup
	if c.Traefik != nil {
		_, written := r.sc.Positions["environment.compose.allowEmptyServices"]
		if ts, err = scenario.ResolveTraefik(c, p, written); err != nil {
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w", r.sc.ComposePath(), err))
		}
	}
	log := r.log.With("component", "compose", "project", p.Name)
	r.watchAnswers(ctx)
	err = cr.stack.Start(ctx, p)
	// What the engine ignores of the file is said even when the start
	// failed: it may be why.
	for _, w := range cr.stack.Warnings {
		w = r.sc.ComposePath() + ": " + w
		cr.warnings = append(cr.warnings, w)
		r.evlog.Emit(event.Event{At: r.clock.Now(), Kind: event.Note, Source: compose.Source, Detail: w})
	}
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("compose project %s: %w", p.Name, err))
	}
	// The watcher lives until teardown, like the local replicas.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cr.watcher = compose.Watch(wctx, cr.cli, cr.stack, r.clock, r.evlog, nil, log.With("part", "watcher"))
	r.env.onClose("compose watcher", func(context.Context) error { cancel(); cr.watcher.Wait(); return nil })
	if ts != nil {
		tc := cr.stack.Container(ts.Service)
		entry := "http://" + tc.Published[ts.EntryPort]
		servers := map[string]traefik.Server{}
		for _, b := range routes.Backends {
			if bc := cr.stack.Container(b.Owner); bc != nil {
				servers[b.Owner] = traefik.Server{Service: b.Owner, Pod: bc.Name, Address: net.JoinHostPort(bc.IP, strconv.Itoa(b.Port))}
			}
		}
		obs := traefik.Start(ctx, traefik.Config{Docker: cr.cli, Container: tc.ID,
			API: "http://" + net.JoinHostPort(tc.IP, strconv.Itoa(ts.Static.APIPort)), Entry: entry,
			Routes: routes, Servers: servers, Clock: r.clock, Sink: r.evlog, Log: log.With("part", "traefik")})
		cr.traefik = obs
		cr.stopTraefik = sync.OnceFunc(func() {
			counts, problems := obs.Close()
			cr.problem(problems...)
			log.Info("traefik access log", "entries", counts.Entries, "forwarded", counts.Forwarded, "no-router-404", counts.NoRouter, "no-server-503", counts.NoServer)
		})
		r.env.onClose("traefik observer", func(context.Context) error { cr.stopTraefik(); return nil })
		for _, s := range r.sc.Services {
			r.vars["services."+s.Name+".url"] = entry
			r.vars["services."+s.Name+".addr"] = strings.TrimPrefix(entry, "http://")
		}
		log.Info("compose project up behind Traefik", "containers", len(cr.stack.Containers), "entry", entry, "allowEmptyServices", ts.Static.AllowEmptyServices)
		return nil
	}
	for _, s := range r.sc.Services {
		sc := cr.stack.Container(s.Name)
		cs, _ := p.Service(s.Name)
		if sc == nil || len(cs.Ports) == 0 {
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: service %s publishes no port and the file runs no Traefik", r.sc.ComposePath(), s.Name))
		}
		addr := sc.Published[cs.Ports[0].Target]
		r.vars["services."+s.Name+".url"] = "http://" + addr
		r.vars["services."+s.Name+".addr"] = addr
	}
	log.Info("compose project up", "containers", len(cr.stack.Containers))
	return nil
}

// waitCompose waits as `docker compose up --wait` does: every container
// healthy, or running when it has no healthcheck.
func (r *run) waitCompose(ctx context.Context) error {
	cr := r.env.compose
	timeout := r.sc.Timeline.ReadyTimeout.D()
	if timeout <= 0 {
		timeout = 120 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var names []string
	for _, c := range cr.stack.Containers {
		names = append(names, c.Service)
	}
	sort.Strings(names)
	for _, n := range names {
		r.log.Info("waiting for the container to be healthy", "service", n, "timeout", timeout)
		if err := cr.stack.WaitHealthy(ctx, cr.stack.Container(n)); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("not healthy within %s: %w", timeout, err)
			}
			return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("compose service %s: %w", n, err))
		}
	}
	// The watcher may see the last transition a poll later.
	for _, n := range names {
		for !cr.watcher.Serving(n) {
			select {
			case <-ctx.Done():
				return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("compose service %s not healthy within %s", n, timeout))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if cr.traefik == nil {
		return nil
	}
	// Traefik routes to every labelled service (its API says so), then
	// its access log's clock is measured. Either failing makes the
	// measurement invalid, said by name; drill has no model to fall back on.
	if err := cr.traefik.WaitUp(ctx); err != nil {
		cr.problem(fmt.Sprintf("Traefik's API: %v", err))
		r.log.Warn("Traefik does not route to the services", "err", err)
		return nil
	}
	if _, err := cr.traefik.Sync(ctx, 5, 10*time.Second); err != nil {
		cr.problem(err.Error())
		r.log.Warn("Traefik's access log unreadable", "err", err)
	}
	return nil
}

// answerPoll is how often [run.watchAnswers] reads the proxies' counters.
const answerPoll = 20 * time.Millisecond

// watchAnswers records, for each proxy of the scenario, when the first
// bytes from its upstream reached a client ([event.DependencyAnswered]):
// the evidence a startup-gate assertion orders the gate's first pass
// after. It reads the embedded Toxiproxy's live counters every 20 ms until
// the proxy answered or teardown; a Toxiproxy without live counters gets a
// note instead (those count a connection's bytes when it closes).
func (r *run) watchAnswers(ctx context.Context) {
	tp := r.env.toxiproxy
	if tp == nil || len(r.sc.Proxies) == 0 {
		return
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r.env.onClose("proxy answer watch", func(context.Context) error { cancel(); <-done; return nil })
	go func() {
		defer close(done)
		waiting := map[string]bool{}
		for _, p := range r.sc.Proxies {
			waiting[p.Name] = true
		}
		t := time.NewTicker(answerPoll)
		defer t.Stop()
		for len(waiting) > 0 {
			for name := range waiting {
				c, err := tp.Counters(wctx, name)
				if err != nil || !c.Live {
					if wctx.Err() == nil {
						r.evlog.Emit(event.Event{At: r.clock.Now(), Kind: event.Note, Source: "run",
							Labels: map[string]string{"proxy": name}, Detail: fmt.Sprintf("proxy %s: no live byte counters (%v): when its dependency first answered is not known", name, err)})
					}
					delete(waiting, name)
					continue
				}
				if c.Downstream > 0 {
					r.evlog.Emit(event.Event{At: r.clock.Now(), Kind: event.DependencyAnswered, Source: "run",
						Labels: map[string]string{"proxy": name}, Value: float64(c.Downstream),
						Detail: fmt.Sprintf("first bytes from upstream through proxy %s", name)})
					delete(waiting, name)
				}
			}
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// composeTargets adds the containers of a compose run's services to ctrs
// (container-pause faults name a Compose service as their dependency); a
// dependency of the same name keeps its own container.
func (r *run) composeTargets(ctrs map[string]string) {
	if r.env == nil || r.env.compose == nil {
		return
	}
	for _, c := range r.env.compose.stack.Containers {
		if _, taken := ctrs[c.Service]; !taken {
			ctrs[c.Service] = c.ID
		}
	}
}
