package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultResetPeer, newResetPeer) }

// newResetPeer builds a Toxiproxy reset_peer toxic: on the first chunk in
// its direction it waits timeout ms and closes with RST. Only connections
// opened while the toxic exists get RST; older ones get a clean FIN
// (Toxiproxy v2.12, found by testing). The fault has passed its spec's checks
// ([scenario.CheckFault]).
func newResetPeer(f scenario.Fault, env *Env) (Injector, error) {
	ms := millis(f.Timeout)
	return newToxic(f, env, map[string]any{"timeout": ms}, fmt.Sprintf("reset_peer after %dms", ms))
}
