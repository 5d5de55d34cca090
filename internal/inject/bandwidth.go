package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultBandwidth, newBandwidth) }

// newBandwidth builds a Toxiproxy bandwidth toxic limiting a stream to rate
// KB/s (1 KB = 1000 bytes). Fields: rateKBps (required, > 0; Toxiproxy
// treats <= 0 as unlimited, which would be no fault).
func newBandwidth(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "rateKBps"); err != nil {
		return nil, err
	}
	if f.RateKBps == nil {
		return nil, errors.New("rateKBps: required, e.g. rateKBps: 10")
	}
	if *f.RateKBps <= 0 {
		return nil, fmt.Errorf("rateKBps: %d must be > 0 (Toxiproxy reads <= 0 as unlimited)", *f.RateKBps)
	}
	return newToxic(f, env, "bandwidth", map[string]any{"rate": *f.RateKBps}, fmt.Sprintf("bandwidth %d KB/s", *f.RateKBps))
}
