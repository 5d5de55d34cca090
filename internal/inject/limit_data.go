package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultLimitData, newLimitData) }

// newLimitData builds a Toxiproxy limit_data toxic: each connection may pass
// bytes in the toxic's direction, then it is closed. Fields: bytes
// (required, > 0).
func newLimitData(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "bytes"); err != nil {
		return nil, err
	}
	if f.Bytes == nil || *f.Bytes <= 0 {
		return nil, errors.New("bytes: required and > 0, e.g. bytes: 1KiB")
	}
	return newToxic(f, env, "limit_data", map[string]any{"bytes": int64(*f.Bytes)},
		fmt.Sprintf("limit_data %d bytes per connection", int64(*f.Bytes)))
}
