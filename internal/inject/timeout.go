package inject

import (
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

func init() { register(scenario.FaultTimeout, newTimeout) }

// newTimeout builds a Toxiproxy timeout toxic: a black hole that drops all
// data and closes the connection after timeout ms; timeout 0 keeps the
// connection open until the toxic is removed (a pause; see the package doc
// for how that differs from down). Removing it CLOSES the held connections.
// Fields: timeout (required, 0 allowed).
func newTimeout(f scenario.Fault, env *Env) (Injector, error) {
	if err := onlyFields(f, "timeout"); err != nil {
		return nil, err
	}
	if f.Timeout == nil {
		return nil, errors.New("timeout: required, e.g. timeout: 0s (hold until removed) or timeout: 5s")
	}
	ms, err := millis("timeout", *f.Timeout)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("timeout %dms (drop data, close after %dms)", ms, ms)
	if ms == 0 {
		desc = "timeout 0ms (hold every connection, drop all data)"
	}
	return newToxic(f, env, "timeout", map[string]any{"timeout": ms}, desc)
}
