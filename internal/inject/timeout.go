package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultTimeout, newTimeout) }

// newTimeout builds a Toxiproxy timeout toxic: a black hole that drops all
// data and closes the connection after timeout ms; timeout 0 keeps the
// connection open until the toxic is removed (a pause; see the package doc
// for how that differs from down). Removing it CLOSES the held connections.
// The fault has passed its spec's checks ([scenario.CheckFault]).
func newTimeout(f scenario.Fault, env *Env) (Injector, error) {
	ms := millis(f.Timeout)
	desc := fmt.Sprintf("timeout %dms (drop data, close after %dms)", ms, ms)
	if ms == 0 {
		desc = "timeout 0ms (hold every connection, drop all data)"
	}
	return newToxic(f, env, map[string]any{"timeout": ms}, desc)
}
