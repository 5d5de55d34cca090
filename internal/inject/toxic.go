package inject

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/scenario"
)

// toxicInjector adds one Toxiproxy toxic per stream (two for stream both,
// named <name>-up and <name>-down) and removes them on revert. Every kind
// except down, process-pause and container-pause is one of these with its
// own attributes.
type toxicInjector struct {
	fault    scenario.Fault
	env      *Env
	typ      string
	attrs    map[string]any
	streams  []string // upstream and/or downstream
	toxicity float64
	desc     string
}

var (
	_ Injector  = (*toxicInjector)(nil)
	_ Describer = (*toxicInjector)(nil)
)

// newToxic builds the injector of a toxic kind from a fault that has
// passed its spec's checks, with defaults applied (stream and toxicity
// set). attrs are the toxic's attributes in Toxiproxy's units; desc
// describes them in the scenario's units.
func newToxic(f scenario.Fault, env *Env, attrs map[string]any, desc string) (Injector, error) {
	if err := validName(f.Proxy); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if env.Toxiproxy == nil {
		return nil, errors.New("no toxiproxy configured")
	}
	sp, _ := scenario.FaultSpecOf(f.Type)
	streams := []string{f.Stream}
	if f.Stream == "both" {
		streams = []string{"upstream", "downstream"}
	}
	return &toxicInjector{fault: f, env: env, typ: sp.Toxic, attrs: attrs, streams: streams, toxicity: *f.Toxicity, desc: desc}, nil
}

// Describe implements [Describer].
func (t *toxicInjector) Describe() string {
	streams := t.streams[0]
	if len(t.streams) == 2 {
		streams = "both streams"
	}
	s := fmt.Sprintf("%s on proxy %s (%s)", t.desc, t.fault.Proxy, streams)
	if t.toxicity != 1 {
		s += fmt.Sprintf(", toxicity %g", t.toxicity)
	}
	return s
}

// toxicNames returns the toxic name for each stream.
func (t *toxicInjector) toxicNames() []string {
	if len(t.streams) == 1 {
		return []string{ToxicName(t.env.RunID, t.fault.Name, "")}
	}
	return []string{ToxicName(t.env.RunID, t.fault.Name, "up"), ToxicName(t.env.RunID, t.fault.Name, "down")}
}

func (t *toxicInjector) entry(op, name string) Entry {
	return Entry{
		Op: op, Key: KindToxic + "/" + t.fault.Proxy + "/" + name, Kind: KindToxic, Fault: t.fault.Name,
		Toxiproxy: t.env.Toxiproxy.APIURL(), Embedded: isEmbedded(t.env.Toxiproxy), Proxy: t.fault.Proxy, Toxic: name,
	}
}

// Inject journals then adds each toxic. If one fails, those added (and the
// failed one, which may have reached the server before a timeout) are
// removed again.
func (t *toxicInjector) Inject(ctx context.Context) (Revert, error) {
	names := t.toxicNames()
	var added []string
	for i, name := range names {
		if err := t.env.Journal.Record(t.entry(OpApply, name)); err != nil {
			return nil, t.undo(ctx, added, fmt.Errorf("journal toxic %s: %w", name, err))
		}
		added = append(added, name)
		err := t.env.Toxiproxy.AddToxic(ctx, t.fault.Proxy, Toxic{
			Name: name, Type: t.typ, Stream: t.streams[i], Toxicity: t.toxicity, Attributes: t.attrs,
		})
		if err != nil {
			return nil, t.undo(ctx, added, err)
		}
	}
	t.env.logger().Info("fault on", "fault", t.fault.Name, "what", t.Describe(), "toxics", names)
	return func(ctx context.Context) error { return t.remove(ctx, names) }, nil
}

// undo removes names after a failed Inject with a fresh bounded context and
// returns cause joined with any removal error.
func (t *toxicInjector) undo(ctx context.Context, names []string, cause error) error {
	if len(names) == 0 {
		return cause
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRevertTimeout)
	defer cancel()
	if err := t.remove(rctx, names); err != nil {
		return errors.Join(cause, fmt.Errorf("undo partial fault: %w", err))
	}
	return cause
}

// remove deletes the toxics in reverse order; one already gone (or whose
// proxy is gone) counts as removed.
func (t *toxicInjector) remove(ctx context.Context, names []string) error {
	var errs []error
	for i := len(names) - 1; i >= 0; i-- {
		name := names[i]
		err := t.env.Toxiproxy.RemoveToxic(ctx, t.fault.Proxy, name)
		if err != nil && !errors.Is(err, ErrToxicNotFound) && !errors.Is(err, ErrProxyNotFound) {
			errs = append(errs, err)
			continue
		}
		if err := t.env.Journal.Record(t.entry(OpRevert, name)); err != nil {
			errs = append(errs, fmt.Errorf("journal revert of %s: %w", name, err))
		}
	}
	if len(errs) == 0 {
		t.env.logger().Info("fault off", "fault", t.fault.Name, "toxics", names)
	}
	return errors.Join(errs...)
}

// millis converts a duration to whole ms (rounded; 0 when unset). The
// fault spec refuses a positive duration that rounds to 0.
func millis(d *scenario.Duration) int64 {
	if d == nil {
		return 0
	}
	return d.D().Round(time.Millisecond).Milliseconds()
}
