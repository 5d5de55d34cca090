package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/scenario"
)

// StubSpec is one HTTP stub of a [RoleStubs] stand-in's setup.
type StubSpec struct {
	// Name is the dependency's name.
	Name string `json:"name"`
	// Spec is the scenario's stub.
	Spec scenario.HTTPStubDep `json:"spec"`
}

// StubsReady is the ready payload of a [RoleStubs] stand-in: each stub's
// listen address (127.0.0.1:<port>) by name.
type StubsReady struct {
	Addrs map[string]string `json:"addrs"`
}

// runStubs serves the stubs of the setup (a JSON array of [StubSpec])
// until ctx ends.
func runStubs(ctx context.Context, setup json.RawMessage, ch *Child) error {
	var specs []StubSpec
	if err := json.Unmarshal(setup, &specs); err != nil {
		return fmt.Errorf("decode stubs setup: %w", err)
	}
	var stubs []*dependencies.HTTPStub
	closeAll := func() error {
		var errs []error
		for _, s := range stubs {
			errs = append(errs, s.Close())
		}
		return errors.Join(errs...)
	}
	ready := StubsReady{Addrs: map[string]string{}}
	for _, sp := range specs {
		s, err := dependencies.StartHTTPStub(ctx, sp.Spec)
		if err != nil {
			_ = closeAll()
			return fmt.Errorf("start http stub %s: %w", sp.Name, err)
		}
		stubs = append(stubs, s)
		ready.Addrs[sp.Name] = s.Addr
	}
	if err := ch.Ready(ready); err != nil {
		_ = closeAll()
		return err
	}
	drain(ctx, ch)
	return closeAll()
}

// StartStubs starts a [RoleStubs] stand-in serving specs and returns it
// with each stub's address by name. cfg's Role, Setup and Ready are set
// here. Errors: those of [Start] (a bad stub spec is the child's error).
func StartStubs(ctx context.Context, cfg Config, specs []StubSpec) (*Process, map[string]string, error) {
	var ready StubsReady
	cfg.Role, cfg.Setup, cfg.Ready = RoleStubs, specs, &ready
	p, err := Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return p, ready.Addrs, nil
}
