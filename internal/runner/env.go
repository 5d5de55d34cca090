package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/standin"
)

// environment is everything the run brought up, torn down in reverse.
type environment struct {
	postgres map[string]*dependencies.Postgres
	// stubs are the HTTP stubs' addresses (127.0.0.1:<port>) by name,
	// served by the stubs stand-in.
	stubs     map[string]string
	toxiproxy inject.Toxiproxy
	// ownToxiproxy says toxiproxy is the run's own stand-in (not a remote
	// server named by the scenario).
	ownToxiproxy bool
	// standIns are the platform's stand-in processes (internal/standin),
	// in the order started.
	standIns []*standin.Process
	services map[string]*localenv.Service
	// placement puts the system under test below drill's CPU priority
	// (local runs; nil otherwise).
	placement *placement.Placement
	// compose is set in compose runs.
	compose *composeRun
	// closers run in reverse order at teardown.
	closers []namedCloser
}

type namedCloser struct {
	name string
	fn   func(ctx context.Context) error
}

func (e *environment) onClose(name string, fn func(ctx context.Context) error) {
	e.closers = append(e.closers, namedCloser{name, fn})
}

// close runs every closer in reverse order, each with its own timeout.
func (e *environment) close(log interface{ Warn(string, ...any) }) error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		c := e.closers[i]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.fn(ctx); err != nil {
			log.Warn("teardown step failed", "step", c.name, "err", err)
			errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
		}
		cancel()
	}
	e.closers = nil
	return errors.Join(errs...)
}

func hostPort(addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, ""
	}
	return h, p
}

// bringUp starts dependencies, Toxiproxy and its proxies, and the services,
// and fills r.vars for ${...} references. Errors carry exit code 3.
func (r *run) bringUp(ctx context.Context) error {
	env := &environment{
		postgres: map[string]*dependencies.Postgres{},
		stubs:    map[string]string{},
		services: map[string]*localenv.Service{},
	}
	r.env = env
	journal, err := inject.OpenJournal(r.opts.StateDir, r.id)
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("open fault journal: %w", err))
	}
	r.journal = journal
	env.onClose("fault journal", func(context.Context) error { return journal.Close() })
	if r.sc.Environment.Type != scenario.EnvKubernetes {
		if err := r.place(); err != nil {
			return err
		}
	}
	if err := r.startStubs(ctx); err != nil {
		return err
	}
	for _, d := range r.sc.Dependencies {
		switch {
		case d.Postgres != nil:
			r.log.Info("starting PostgreSQL", "dependency", d.Name)
			group, err := env.placement.Deps()
			if err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start dependency %s: %w", d.Name, err))
			}
			pg, err := r.startPostgres(ctx, d.Name, *d.Postgres, group)
			if err != nil {
				return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start dependency %s: %w", d.Name, err))
			}
			env.postgres[d.Name] = pg
			env.onClose("dependency "+d.Name, func(ctx context.Context) error {
				if err := pg.Close(ctx); err != nil {
					return err
				}
				return r.journalPostgresGone(d.Name, pg.Dir)
			})
			r.setVars("dependencies."+d.Name, pg.Addr)
			r.vars["dependencies."+d.Name+".dsn"] = pg.DSN
		}
	}

	if r.isCompose() {
		if err := r.prepareCompose(ctx); err != nil {
			return err
		}
	}
	if len(r.sc.Proxies) > 0 || r.needsToxiproxy() {
		cpuuse.Do(ctx, cpuuse.PartToxiproxy, func(ctx context.Context) { err = r.startToxiproxy(ctx) })
		if err != nil {
			return err
		}
	}

	if r.isCompose() {
		return r.startCompose(ctx)
	}
	for _, s := range r.sc.Services {
		if r.sc.Environment.Type == scenario.EnvKubernetes {
			continue // its ${services.NAME.url} is its url (startVars)
		}
		if err := r.startService(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// startPostgres starts a throwaway PostgreSQL and journals its temp dir and
// postmaster as they come into being, so that `drill cleanup` can remove
// the cluster if drill is killed (SIGKILL) before it stops it. A start that
// failed removed everything; its entry is closed then.
func (r *run) startPostgres(ctx context.Context, name string, spec scenario.PostgresDep, group *placement.Group) (*dependencies.Postgres, error) {
	var dir string
	pg, err := dependencies.StartPostgres(ctx, spec, r.log.With("dependency", name), dependencies.WithFootprint(func(fp dependencies.PostgresFootprint) error {
		dir = fp.Dir
		return r.journal.Record(inject.PostgresEntry(inject.OpApply, name, fp.Dir, fp.Postmaster))
	}), dependencies.InGroup(group))
	if err != nil && dir != "" {
		if _, statErr := os.Stat(dir); os.IsNotExist(statErr) {
			if jerr := r.journalPostgresGone(name, dir); jerr != nil {
				r.log.Warn("could not journal the removal of a failed PostgreSQL", "err", jerr)
			}
		}
	}
	return pg, err
}

// journalPostgresGone closes the journal entry of a stopped PostgreSQL
// whose temp dir (binaries mode) is removed.
func (r *run) journalPostgresGone(name, dir string) error {
	if dir == "" {
		return nil // a container: never journaled
	}
	if err := r.journal.Record(inject.PostgresEntry(inject.OpRevert, name, dir, proctree.ID{})); err != nil {
		return fmt.Errorf("journal the removal of dependency %s: %w", name, err)
	}
	return nil
}

// place makes the run's CPU placement (internal/placement): by default a
// cgroup of the run with a lower CPU weight than drill's, or nice +5 where
// drill may not make one; and each service's CPU limit. The cgroup is
// journaled before it is made, so `drill cleanup` removes it after a
// SIGKILL; teardown removes it once every process in it has ended.
func (r *run) place() error {
	limits := map[string]scenario.CPUQuantity{}
	for _, s := range r.sc.Services {
		if q := s.CPULimit(); q > 0 {
			limits[s.Name] = q
		}
	}
	lower := true
	if l := r.sc.Environment.Local; l != nil && l.SUTPriority == scenario.SUTPrioritySame {
		lower = false
	}
	pl, err := placement.Setup(placement.Config{
		RunID: r.id, Lower: lower, Limits: limits, Log: r.log.With("component", "placement"),
		Journal: func(dir string) error {
			return r.journal.Record(inject.Entry{Op: inject.OpApply, Key: "cgroup", Kind: inject.KindCgroup, Cgroup: dir})
		},
	})
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("place the system under test: %w", err))
	}
	r.env.placement = pl
	rep := pl.Report()
	r.log.Info("CPU priority", "mode", rep.Mode, "applied", rep.Line)
	if pl.Cgroup() != "" {
		r.env.onClose("cgroup "+pl.Cgroup(), func(context.Context) error {
			if err := pl.Close(); err != nil {
				return err
			}
			return r.journal.Record(inject.Entry{Op: inject.OpRevert, Key: "cgroup", Kind: inject.KindCgroup, Cgroup: pl.Cgroup()})
		})
	}
	return nil
}

// removeSettledJournal removes the run's journal when it leaves nothing
// for `drill cleanup` to undo: every journaled change (faults, proxies,
// PostgreSQL temp dirs) was reverted and, when the run got as far as
// reading its proxies back, its cleanup was verified. That holds for a
// passing run and for one that ended in an error alike; any other run
// keeps its journal. Call it after teardown.
func (r *run) removeSettledJournal(res Result) {
	if r.journal == nil || (res.Record != nil && !res.Record.Cleanup.Verified) {
		return
	}
	path := r.journal.Path()
	entries, err := inject.ReadJournal(path)
	if err != nil {
		r.log.Warn("could not read the fault journal back; keeping it", "path", path, "err", err)
		return
	}
	if pending := inject.Pending(entries); len(pending) > 0 {
		for _, e := range pending {
			if e.Kind == inject.KindCgroup {
				r.log.Warn("the run's cgroup is still there; remove it with drill cleanup once its processes ended",
					"cgroup", e.Cgroup, "command", inject.CleanupCommand(r.id, r.toxiproxyURL()))
			}
		}
		r.log.Warn("the run left changes behind; its journal stays for drill cleanup", "path", path, "pending", len(pending))
		return
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		r.log.Warn("could not remove the fault journal of a settled run", "path", path, "err", err)
	}
}

func (r *run) needsToxiproxy() bool {
	for _, f := range r.sc.Faults {
		if f.Proxy != "" {
			return true
		}
	}
	return false
}

func (r *run) setVars(prefix, addr string) {
	h, p := hostPort(addr)
	r.vars[prefix+".addr"] = addr
	r.vars[prefix+".host"] = h
	r.vars[prefix+".port"] = p
}

func (r *run) expand(field, s string) (string, error) {
	out, err := scenario.Expand(s, r.vars)
	if err != nil {
		return "", exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w", field, err))
	}
	return out, nil
}

func (r *run) startToxiproxy(ctx context.Context) error {
	env := r.env
	if url := r.sc.Toxiproxy.URL; url != "" {
		env.toxiproxy = inject.NewRemote(url)
	} else {
		tp, err := r.startToxiproxyStandIn(ctx)
		if err != nil {
			return err
		}
		env.toxiproxy, env.ownToxiproxy = tp, true
	}
	if left, err := inject.Leftovers(ctx, env.toxiproxy); err != nil {
		r.log.Warn("could not check toxiproxy for leftovers of earlier runs", "err", err)
	} else if len(left) > 0 {
		r.log.Warn("toxiproxy holds faults of earlier drill runs; remove them with `drill cleanup`", "leftovers", fmt.Sprint(left))
	}
	for i, p := range r.sc.Proxies {
		up, err := r.expand(fmt.Sprintf("proxies[%d].upstream", i), p.Upstream)
		if err != nil {
			return err
		}
		p.Upstream = up
		p.Listen = r.proxyListen(i, p.Listen)
		info, err := inject.EnsureProxy(ctx, env.toxiproxy, r.id, p, r.journal, r.stack)
		if err != nil {
			return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("create proxy %s: %w", p.Name, err))
		}
		r.setVars("proxies."+p.Name, info.Listen)
		r.log.Info("proxy ready", "proxy", p.Name, "listen", info.Listen, "upstream", up)
	}
	return nil
}

// serviceCommand is the argv that runs one replica of s: the reference
// service's `drill serve` command or s.Command, then s.Args, each expanded
// like every other string value (${...} filled, $$ written as $).
func (r *run) serviceCommand(s scenario.Service) ([]string, error) {
	var argv []string
	if s.Reference != "" {
		argv = []string{r.opts.Executable, "serve", s.Reference, "--build", s.Build}
	} else {
		cmd, err := r.expandAll(fmt.Sprintf("services[%s].command", s.Name), s.Command)
		if err != nil {
			return nil, err
		}
		argv = cmd
	}
	args, err := r.expandAll(fmt.Sprintf("services[%s].args", s.Name), s.Args)
	if err != nil {
		return nil, err
	}
	return append(argv, args...), nil
}

// expandAll expands each string of list; field names the list.
func (r *run) expandAll(field string, list []string) ([]string, error) {
	out := make([]string, len(list))
	for i, v := range list {
		x, err := r.expand(fmt.Sprintf("%s[%d]", field, i), v)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// expandEnv expands the values of env; field names the map.
func (r *run) expandEnv(field string, env map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(env))
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := r.expand(field+"."+k, env[k])
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// runSetup runs s's setup step with drill's environment, the service's env
// (already expanded) and the step's own, its output in
// <logDir>/<service>-setup.log. A failed step is exit 3.
func (r *run) runSetup(ctx context.Context, s scenario.Service, svcEnv map[string]string, logDir string) error {
	st := s.Setup
	field := fmt.Sprintf("services[%s].setup", s.Name)
	cmd, err := r.expandAll(field+".command", st.Command)
	if err != nil {
		return err
	}
	args, err := r.expandAll(field+".args", st.Args)
	if err != nil {
		return err
	}
	own, err := r.expandEnv(field+".env", st.Env)
	if err != nil {
		return err
	}
	env := os.Environ()
	for _, m := range []map[string]string{svcEnv, own} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+m[k])
		}
	}
	spec := localenv.SetupSpec{
		Service: s.Name,
		Command: append(cmd, args...),
		Env:     env,
		Timeout: st.Timeout.D(),
		LogPath: filepath.Join(logDir, s.Name+"-setup.log"),
		Redact:  r.redactor,
	}
	r.log.Info("running setup", "service", s.Name, "log", spec.LogPath)
	if err := localenv.RunSetup(ctx, r.clock, r.evlog, spec, r.log.With("service", s.Name)); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("service %s not started: %w", s.Name, err))
	}
	return nil
}

func (r *run) startService(ctx context.Context, s scenario.Service) error {
	// scenario.Load already merged the manifest's probes (inline ones win).
	probes := s.Probes
	env, err := r.expandEnv(fmt.Sprintf("services[%s].env", s.Name), s.Env)
	if err != nil {
		return err
	}
	argv, err := r.serviceCommand(s)
	if err != nil {
		return err
	}
	logDir := filepath.Join(r.outDir(), "logs")
	if s.Setup != nil {
		if err := r.runSetup(ctx, s, env, logDir); err != nil {
			return err
		}
	}
	grace := 30 * time.Second
	if s.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*s.TerminationGracePeriodSeconds) * time.Second
	}
	replicas := s.Replicas
	if replicas == 0 {
		replicas = 1
	}
	spec := localenv.ServiceSpec{
		Name:     s.Name,
		Command:  argv,
		Env:      env,
		Replicas: replicas,
		Probes:   probes,
		Grace:    grace,
		PreStop:  time.Duration(s.PreStopSleep()) * time.Second,
		Listen:   s.Listen,
		// A deleted pod stays routed for this long (a cluster's proxies
		// learn of the deletion late).
		EndpointLag: r.endpointLag(),
		LogDir:      logDir,
		Redact:      r.redactor,
		// Each replica in its own group: drill-<run>/<service>/<pod>.
		Placement: r.env.placement,
		// Other clients reach the replicas through a listener in a
		// process of its own; drill's load is routed in this one.
		Listener: r.serviceListener,
		Ports:    r.ports,
	}
	if s.Port != nil {
		spec.PortEnv, spec.PortFormat = s.Port.Env, s.Port.Format
	}
	if s.Balancing == scenario.BalancingConnection {
		spec.Balancing = localenv.PerConnection
	}
	r.log.Info("starting service", "service", s.Name, "replicas", replicas, "command", fmt.Sprint(r.redactor.Args(spec.Command)))
	// The replicas live until teardown, not until the graceful context
	// ends: a signal must stop the load first, then the faults, then the
	// services (otherwise requests still in flight meet stopping replicas
	// and end in 502, failing windows that were passing).
	var svc *localenv.Service
	cpuuse.Do(context.WithoutCancel(ctx), cpuuse.PartRuntime, func(ctx context.Context) {
		svc, err = localenv.Start(ctx, r.clock, r.evlog, spec, r.log.With("service", s.Name))
	})
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start service %s: %w", s.Name, err))
	}
	r.env.services[s.Name] = svc
	r.env.onClose("service "+s.Name, svc.Stop)
	r.vars["services."+s.Name+".url"] = svc.URL()
	h, p := hostPort(svc.URL()[len("http://"):])
	r.vars["services."+s.Name+".addr"] = net.JoinHostPort(h, p)
	return nil
}

// waitReady waits until every local service has all replicas ready.
func (r *run) waitReady(ctx context.Context) error {
	timeout := r.sc.Timeline.ReadyTimeout.D()
	if timeout <= 0 {
		timeout = 120 * time.Second
	}
	if r.env.compose != nil {
		return r.waitCompose(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range r.sc.Services {
		svc, ok := r.env.services[s.Name]
		if !ok {
			continue
		}
		n := s.Replicas
		if n == 0 {
			n = 1
		}
		r.log.Info("waiting for replicas to be ready", "service", s.Name, "replicas", n, "timeout", timeout)
		if err := svc.WaitReady(ctx, n); err != nil {
			if errors.Is(err, localenv.ErrListensElsewhere) {
				return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("service %s cannot become ready: %w", s.Name, err))
			}
			return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("service %s did not become ready within %s: %w", s.Name, timeout, err))
		}
	}
	return nil
}

// processTargets maps dependency names to process groups and containers for
// process-pause and container-pause faults.
func (r *run) processTargets() (map[string]int, map[string]string) {
	procs := map[string]int{}
	ctrs := map[string]string{}
	for name, pg := range r.env.postgres {
		if pg.PGID > 0 {
			procs[name] = pg.PGID
		}
		if pg.ContainerID != "" {
			ctrs[name] = pg.ContainerID
		}
	}
	r.composeTargets(ctrs)
	return procs, ctrs
}

// endpointLag is environment.local.endpointLag of the run's scenario
// (defaults filled), 0 outside the local environment.
func (r *run) endpointLag() time.Duration {
	if l := r.sc.Environment.Local; l != nil && l.EndpointLag != nil {
		return l.EndpointLag.Duration
	}
	return 0
}
