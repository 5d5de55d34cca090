package standin

import (
	"context"
	"encoding/json"

	"github.com/drillhq/drill/internal/inject"
)

// ToxiproxyReady is the ready payload of a [RoleToxiproxy] stand-in.
type ToxiproxyReady struct {
	// API is the Toxiproxy API's base URL (http://127.0.0.1:<port>).
	API string `json:"api"`
	// MeterID keys the server's traffic meters ([inject.NewMetered]).
	MeterID string `json:"meterID"`
}

// runToxiproxy serves an [inject.Embedded] Toxiproxy until ctx ends; the
// setup line is ignored. It takes no commands: the parent drives it
// through its HTTP API, as any Toxiproxy.
func runToxiproxy(ctx context.Context, _ json.RawMessage, ch *Child) error {
	e, err := inject.NewEmbedded(ctx, ch.Log)
	if err != nil {
		return err
	}
	if err := ch.Ready(ToxiproxyReady{API: e.APIURL(), MeterID: e.MeterID()}); err != nil {
		_ = e.Close()
		return err
	}
	drain(ctx, ch)
	return e.Close()
}

// drain discards commands until ctx ends (stdin closed or a signal).
func drain(ctx context.Context, ch *Child) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch.Commands:
			if !ok {
				return
			}
		}
	}
}

// StartToxiproxy starts a [RoleToxiproxy] stand-in and returns it with a
// client of its API. cfg's Role, Setup and Ready are set here. Errors:
// those of [Start].
func StartToxiproxy(ctx context.Context, cfg Config) (*Process, *inject.Metered, error) {
	var ready ToxiproxyReady
	cfg.Role, cfg.Setup, cfg.Ready = RoleToxiproxy, struct{}{}, &ready
	p, err := Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return p, inject.NewMetered(ready.API, ready.MeterID), nil
}
