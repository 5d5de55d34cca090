package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultSlowClose, newSlowClose) }

// newSlowClose builds a Toxiproxy slow_close toxic: data passes, but the
// close after EOF is held back for delay ms. Fields: delay (required).
func newSlowClose(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "delay"); err != nil {
		return nil, err
	}
	if f.Delay == nil {
		return nil, errors.New("delay: required, e.g. delay: 2s")
	}
	ms, err := millis("delay", *f.Delay)
	if err != nil {
		return nil, err
	}
	return newToxic(f, env, "slow_close", map[string]any{"delay": ms}, fmt.Sprintf("slow_close %dms", ms))
}
