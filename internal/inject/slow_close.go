package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultSlowClose, newSlowClose) }

// newSlowClose builds a Toxiproxy slow_close toxic: data passes, but the
// close after EOF is held back for delay ms. The fault has passed its
// spec's checks ([scenario.CheckFault]).
func newSlowClose(f scenario.Fault, env *Env) (Injector, error) {
	ms := millis(f.Delay)
	return newToxic(f, env, map[string]any{"delay": ms}, fmt.Sprintf("slow_close %dms", ms))
}
