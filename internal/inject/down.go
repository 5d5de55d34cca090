package inject

import (
	"context"
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultDown, newDown) }

// downInjector disables a proxy: its listener closes and every connection
// drops, so clients get "connection refused" or a reset at once (compare the
// timeout-0 pause in the package doc). Revert re-enables it.
type downInjector struct {
	fault scenario.Fault
	env   *Env
}

var (
	_ Injector  = (*downInjector)(nil)
	_ Describer = (*downInjector)(nil)
)

// newDown builds the injector of a down fault that has passed its spec's
// checks ([scenario.CheckFault]).
func newDown(f scenario.Fault, env *Env) (Injector, error) {
	if err := validName(f.Proxy); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if env.Toxiproxy == nil {
		return nil, errors.New("no toxiproxy configured")
	}
	return &downInjector{fault: f, env: env}, nil
}

// Describe implements [Describer].
func (d *downInjector) Describe() string { return "proxy " + d.fault.Proxy + " down (disabled)" }

func (d *downInjector) entry(op string) Entry {
	return Entry{
		Op: op, Key: KindProxyDisabled + "/" + d.fault.Proxy, Kind: KindProxyDisabled, Fault: d.fault.Name,
		Toxiproxy: d.env.Toxiproxy.APIURL(), Embedded: isEmbedded(d.env.Toxiproxy), Proxy: d.fault.Proxy,
	}
}

// Inject implements [Injector].
func (d *downInjector) Inject(ctx context.Context) (Revert, error) {
	if err := d.env.Journal.Record(d.entry(OpApply)); err != nil {
		return nil, fmt.Errorf("journal down: %w", err)
	}
	if err := d.env.Toxiproxy.SetEnabled(ctx, d.fault.Proxy, false); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRevertTimeout)
		defer cancel()
		if rerr := d.enable(rctx); rerr != nil {
			return nil, errors.Join(err, fmt.Errorf("undo partial fault: %w", rerr))
		}
		return nil, err
	}
	d.env.logger().Info("fault on", "fault", d.fault.Name, "what", d.Describe())
	return d.enable, nil
}

func (d *downInjector) enable(ctx context.Context) error {
	err := d.env.Toxiproxy.SetEnabled(ctx, d.fault.Proxy, true)
	if err != nil && !errors.Is(err, ErrProxyNotFound) {
		return err
	}
	if err := d.env.Journal.Record(d.entry(OpRevert)); err != nil {
		return fmt.Errorf("journal revert of down: %w", err)
	}
	d.env.logger().Info("fault off", "fault", d.fault.Name, "what", d.Describe())
	return nil
}
