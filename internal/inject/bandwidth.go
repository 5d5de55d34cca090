package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultBandwidth, newBandwidth) }

// newBandwidth builds a Toxiproxy bandwidth toxic limiting a stream to rate
// KB/s (1 KB = 1000 bytes). The fault has passed its spec's checks
// ([scenario.CheckFault]; rateKBps above 0, since Toxiproxy reads 0 as
// unlimited).
func newBandwidth(f scenario.Fault, env *Env) (Injector, error) {
	return newToxic(f, env, map[string]any{"rate": *f.RateKBps}, fmt.Sprintf("bandwidth %d KB/s", *f.RateKBps))
}
