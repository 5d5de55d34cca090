package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultLatency, newLatency) }

// newLatency builds a Toxiproxy latency toxic: each chunk is delayed by
// latency ± jitter (ms), measured from when the chunk was read. The fault
// has passed its spec's checks ([scenario.CheckFault]).
func newLatency(f scenario.Fault, env *Env) (Injector, error) {
	lat, jit := millis(f.Latency), millis(f.Jitter)
	desc := fmt.Sprintf("latency %dms", lat)
	if jit > 0 {
		desc += fmt.Sprintf(" ±%dms", jit)
	}
	return newToxic(f, env, map[string]any{"latency": lat, "jitter": jit}, desc)
}
