package inject

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// newToxic validates the fields common to every toxic kind and builds the
// injector. desc describes the attributes in the scenario's units.
func newToxic(f scenario.Fault, env *Env, typ string, attrs map[string]any, desc string) (Injector, error) {
	if f.Proxy == "" {
		return nil, errors.New("proxy: required for a toxic")
	}
	if err := validName(f.Proxy); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if f.Dependency != "" {
		return nil, fmt.Errorf("dependency: does not apply to %s (it acts on proxy %q)", f.Type, f.Proxy)
	}
	if env.Toxiproxy == nil {
		return nil, errors.New("no toxiproxy configured")
	}
	streams, err := parseStream(f.Stream)
	if err != nil {
		return nil, err
	}
	tox, err := toxicity(f.Toxicity)
	if err != nil {
		return nil, err
	}
	return &toxicInjector{fault: f, env: env, typ: typ, attrs: attrs, streams: streams, toxicity: tox, desc: desc}, nil
}

// parseStream maps the scenario's stream to Toxiproxy streams.
func parseStream(s string) ([]string, error) {
	switch s {
	case "", "downstream":
		return []string{"downstream"}, nil
	case "upstream":
		return []string{"upstream"}, nil
	case "both":
		return []string{"upstream", "downstream"}, nil
	default:
		return nil, fmt.Errorf("stream: %q is not one of both, downstream, upstream", s)
	}
}

// toxicity defaults to 1 and refuses 0: Toxiproxy stores an explicit 0 as
// "never affect a connection" (LIBRARY-NOTES 1.5 pitfall 1), which would
// make the drill pass without a fault.
func toxicity(t *float64) (float64, error) {
	if t == nil {
		return 1, nil
	}
	switch {
	case *t == 0:
		return 0, errors.New("toxicity: 0 would never affect a connection; omit it (default 1) or use a value in (0, 1]")
	case *t < 0 || *t > 1:
		return 0, fmt.Errorf("toxicity: %g is outside (0, 1]", *t)
	}
	return *t, nil
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

// fieldsSet lists the kind-specific fields set on f, by YAML name.
func fieldsSet(f scenario.Fault) []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(f.Latency != nil, "latency")
	add(f.Jitter != nil, "jitter")
	add(f.Timeout != nil, "timeout")
	add(f.RateKBps != nil, "rateKBps")
	add(f.Delay != nil, "delay")
	add(f.AverageSize != nil, "averageSize")
	add(f.SizeVariation != nil, "sizeVariation")
	add(f.Bytes != nil, "bytes")
	return out
}

// onlyFields refuses kind-specific fields that do not apply to f.Type: a
// "timeout" on a latency fault is a mistake, not something to ignore.
func onlyFields(f scenario.Fault, allowed ...string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	var bad []string
	for _, name := range fieldsSet(f) {
		if !ok[name] {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	want := "none"
	if len(allowed) > 0 {
		want = strings.Join(allowed, ", ")
	}
	return fmt.Errorf("%s: does not apply to type %s (its fields: %s)", strings.Join(bad, ", "), f.Type, want)
}

// millis converts a duration to whole ms (rounded), refusing a positive
// duration below 0.5 ms that would round to 0 (which often means "forever"
// or "off" to Toxiproxy).
func millis(field string, d scenario.Duration) (int64, error) {
	ms := d.D().Round(time.Millisecond).Milliseconds()
	if d.D() > 0 && ms == 0 {
		return 0, fmt.Errorf("%s: %v rounds to 0ms; Toxiproxy counts whole milliseconds", field, d.D())
	}
	return ms, nil
}
