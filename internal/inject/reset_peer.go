package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultResetPeer, newResetPeer) }

// newResetPeer builds a Toxiproxy reset_peer toxic: on the first chunk in
// its direction it waits timeout ms and closes with RST. Only connections
// opened while the toxic exists get RST; older ones get a clean FIN
// (LIBRARY-NOTES 1.5 pitfall 2). Fields: timeout (required, 0 = at once).
func newResetPeer(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "timeout"); err != nil {
		return nil, err
	}
	if f.Timeout == nil {
		return nil, errors.New("timeout: required, e.g. timeout: 0s (reset at the first byte)")
	}
	ms, err := millis("timeout", *f.Timeout)
	if err != nil {
		return nil, err
	}
	return newToxic(f, env, "reset_peer", map[string]any{"timeout": ms}, fmt.Sprintf("reset_peer after %dms", ms))
}
