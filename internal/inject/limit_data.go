package inject

import (
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultLimitData, newLimitData) }

// newLimitData builds a Toxiproxy limit_data toxic: each connection may pass
// bytes in the toxic's direction, then it is closed. The fault has passed
// its spec's checks ([scenario.CheckFault]).
func newLimitData(f scenario.Fault, env *Env) (Injector, error) {
	return newToxic(f, env, map[string]any{"bytes": int64(*f.Bytes)},
		fmt.Sprintf("limit_data %d bytes per connection", int64(*f.Bytes)))
}
