package runner

import (
	"context"
	"fmt"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/inject"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/standin"
)

// The stand-ins' names: their parts in the CPU line and run.json's cpu,
// their journal entries, their log component.
const (
	standInToxiproxy = "toxiproxy"
	standInStubs     = "stubs"
	// standInServicePrefix starts the name of a local Service's listener
	// ("service order-gateway"); their CPU is one part, standInServices.
	standInServicePrefix = "service "
	standInServices      = "local Services"
)

// standInConfig is the common configuration of the run's stand-ins: drill's
// own binary (the code that runs this run), beside drill's own process
// and at its priority, so that neither the replicas' CPU starves them (a
// starved Toxiproxy would make the faults larger than written) nor they
// the generator (they run in processes of their own, not on its Go
// scheduler).
func (r *run) standInConfig(name string) standin.Config {
	return standin.Config{Name: name, Log: r.log.With("component", name)}
}

// keepStandIn journals p (so `drill cleanup` can end it should this
// process die) and stops it at teardown.
func (r *run) keepStandIn(p *standin.Process) error {
	ids := proctree.IDs([]int{p.PID()})
	if len(ids) == 0 {
		return fmt.Errorf("stand-in %s (pid %d) ended as it started", p.Name(), p.PID())
	}
	r.env.standIns = append(r.env.standIns, p)
	r.env.onClose("stand-in "+p.Name(), func(ctx context.Context) error {
		err := p.Stop(ctx)
		if _, early := p.Early(); early != nil {
			// Gone before drill stopped it: VALIDITY says so (standInsEnded),
			// and there is no process left for drill cleanup to end.
			err = nil
		}
		if err != nil {
			return err
		}
		return r.journal.Record(inject.StandInEntry(inject.OpRevert, p.Name(), ids[0]))
	})
	if err := r.journal.Record(inject.StandInEntry(inject.OpApply, p.Name(), ids[0])); err != nil {
		return fmt.Errorf("journal stand-in %s: %w", p.Name(), err)
	}
	return nil
}

// startStubs starts one stand-in serving every HTTP stub dependency and
// fills their ${dependencies.<name>.*} references. None: nothing started.
func (r *run) startStubs(ctx context.Context) error {
	var specs []standin.StubSpec
	for _, d := range r.sc.Dependencies {
		if d.HTTPStub != nil {
			specs = append(specs, standin.StubSpec{Name: d.Name, Spec: *d.HTTPStub})
		}
	}
	if len(specs) == 0 {
		return nil
	}
	p, addrs, err := standin.StartStubs(ctx, r.standInConfig(standInStubs), specs)
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start the HTTP stubs: %w", err))
	}
	if err := r.keepStandIn(p); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, err)
	}
	for _, s := range specs {
		addr := addrs[s.Name]
		r.env.stubs[s.Name] = addr
		r.setVars("dependencies."+s.Name, addr)
		r.vars["dependencies."+s.Name+".url"] = "http://" + addr
	}
	return nil
}

// startToxiproxyStandIn starts the run's own Toxiproxy as a stand-in.
func (r *run) startToxiproxyStandIn(ctx context.Context) (inject.Toxiproxy, error) {
	p, tp, err := standin.StartToxiproxy(ctx, r.standInConfig(standInToxiproxy))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("start toxiproxy: %w", err))
	}
	if err := r.keepStandIn(p); err != nil {
		return nil, exitcode.Wrap(exitcode.CouldNotRun, err)
	}
	return ownedToxiproxy{Toxiproxy: tp, p: p}, nil
}

// ownedToxiproxy is the run's own Toxiproxy stand-in. Once its process
// has ended before drill stopped it, it holds no proxy and no toxic (its
// listeners went with it): removing them succeeds and listing them finds
// none, so the revert and its read-back say what is true (nothing left)
// instead of failing on a refused connection. The run is INVALID for it
// anyway ([run.standInsEnded]).
type ownedToxiproxy struct {
	inject.Toxiproxy
	p *standin.Process
}

// EndsWithRun is [inject.RunOwned]: the stand-in ends with the run, so
// the journal marks what is made in it as embedded.
func (o ownedToxiproxy) EndsWithRun() bool { return true }

func (o ownedToxiproxy) gone() bool {
	_, err := o.p.Early()
	return err != nil
}

// DeleteProxy is [inject.Toxiproxy.DeleteProxy]; nil once the process ended.
func (o ownedToxiproxy) DeleteProxy(ctx context.Context, name string) error {
	if o.gone() {
		return nil
	}
	return o.Toxiproxy.DeleteProxy(ctx, name)
}

// RemoveToxic is [inject.Toxiproxy.RemoveToxic]; nil once the process
// ended.
func (o ownedToxiproxy) RemoveToxic(ctx context.Context, proxy, toxic string) error {
	if o.gone() {
		return nil
	}
	return o.Toxiproxy.RemoveToxic(ctx, proxy, toxic)
}

// SetEnabled is [inject.Toxiproxy.SetEnabled]; nil once the process ended.
func (o ownedToxiproxy) SetEnabled(ctx context.Context, name string, enabled bool) error {
	if o.gone() {
		return nil
	}
	return o.Toxiproxy.SetEnabled(ctx, name, enabled)
}

// Proxies is [inject.Toxiproxy.Proxies]; none once the process ended.
func (o ownedToxiproxy) Proxies(ctx context.Context) (map[string]inject.ProxyInfo, error) {
	if o.gone() {
		return map[string]inject.ProxyInfo{}, nil
	}
	return o.Toxiproxy.Proxies(ctx)
}

// Toxics is [inject.Toxiproxy.Toxics]; none once the process ended.
func (o ownedToxiproxy) Toxics(ctx context.Context, proxy string) ([]inject.Toxic, error) {
	if o.gone() {
		return nil, nil
	}
	return o.Toxiproxy.Toxics(ctx, proxy)
}

// serviceListener starts the listener of a local Service as a stand-in
// ([localenv.ServiceSpec.Listener]).
func (r *run) serviceListener(ctx context.Context, service, listen string, b localenv.Balancing) (localenv.Listener, error) {
	p, l, err := standin.StartService(ctx, r.standInConfig(standInServicePrefix+service), service, listen, b)
	if err != nil {
		return nil, err
	}
	if err := r.keepStandIn(p); err != nil {
		return nil, err
	}
	return l, nil
}

// standInsEnded says, for each stand-in that ended before drill stopped
// it, why the measurement is invalid: what it carried (proxied bytes and
// faults, stub answers, a Service's other clients) was gone for the rest
// of the run, so the system was not the one the scenario describes.
func (r *run) standInsEnded() []string {
	var out []string
	for _, p := range r.env.standIns {
		at, err := p.Early()
		if err == nil {
			continue
		}
		out = append(out, fmt.Sprintf("%v at t=%.1fs: what it carried was gone for the rest of the run",
			err, r.clock.Offset(at).Seconds()))
	}
	return out
}
