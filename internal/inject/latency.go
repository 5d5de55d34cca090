package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultLatency, newLatency) }

// newLatency builds a Toxiproxy latency toxic: each chunk is delayed by
// latency ± jitter (ms), measured from when the chunk was read.
// Fields: latency (required), jitter (default 0, <= latency).
func newLatency(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "latency", "jitter"); err != nil {
		return nil, err
	}
	if f.Latency == nil {
		return nil, errors.New("latency: required, e.g. latency: 100ms")
	}
	lat, err := millis("latency", *f.Latency)
	if err != nil {
		return nil, err
	}
	var jit int64
	if f.Jitter != nil {
		if jit, err = millis("jitter", *f.Jitter); err != nil {
			return nil, err
		}
		if jit > lat {
			return nil, fmt.Errorf("jitter: %dms exceeds latency %dms", jit, lat)
		}
	}
	desc := fmt.Sprintf("latency %dms", lat)
	if jit > 0 {
		desc += fmt.Sprintf(" ±%dms", jit)
	}
	return newToxic(f, env, "latency", map[string]any{"latency": lat, "jitter": jit}, desc)
}
