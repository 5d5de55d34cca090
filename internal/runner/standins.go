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
		if err := p.Stop(ctx); err != nil {
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
	return tp, nil
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
