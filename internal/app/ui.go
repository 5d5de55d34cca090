package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/console"
	"github.com/drillhq/drill/internal/control"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/runner"
	"github.com/drillhq/drill/internal/scenario"
)

// uiFlags are drill run's game-day console flags.
type uiFlags struct {
	on           bool
	addr         string
	tokenFile    string
	readonlyOpen bool
	linger       bool
}

func (f *uiFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.on, "ui", false, "serve the game-day console (live page and API) while the run lasts; its URL and token go to stderr")
	cmd.Flags().StringVar(&f.addr, "ui-addr", "127.0.0.1:0", "HOST:PORT of the console (a non-loopback address needs --ui-token-file)")
	cmd.Flags().StringVar(&f.tokenFile, "ui-token-file", "", "read the console's tokens from FILE (lines TOKEN or LABEL TOKEN); the token is then never printed")
	cmd.Flags().BoolVar(&f.readonlyOpen, "ui-readonly-open", false, "let the page and GET requests in without a token (commands still need one)")
	cmd.Flags().BoolVar(&f.linger, "ui-linger", false, "keep the console up after the run until Ctrl-C")
}

// uiServer is a console or, without --ui, nothing (its methods do nothing).
type uiServer struct {
	srv    *console.Server
	linger bool
}

// listen starts the console when --ui asks for it; its errors are bad
// usage (exit 2), returned before the run touches anything.
func (f *uiFlags) listen(g *Globals, sc *scenario.Scenario) (*uiServer, error) {
	if !f.on {
		if f.tokenFile != "" || f.readonlyOpen || f.linger {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill run: --ui-token-file, --ui-readonly-open and --ui-linger need --ui"))
		}
		for _, flt := range sc.Faults {
			if flt.ManualStart {
				return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill run: fault %s starts by hand (at: manual): run with --ui to start it from the console", flt.Name))
			}
		}
		return &uiServer{}, nil
	}
	srv, err := console.Listen(console.Options{Addr: f.addr, TokenFile: f.tokenFile, ReadonlyOpen: f.readonlyOpen, Logger: g.Logger.With("component", "console")})
	if err != nil {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill run --ui: %w", err))
	}
	fmt.Fprintln(g.Stderr, srv.Announce())
	return &uiServer{srv: srv, linger: f.linger}, nil
}

// attach is runner.Options.OnLive (nil without a console).
func (u *uiServer) attach() func(*control.Control) {
	if u.srv == nil {
		return nil
	}
	return u.srv.Attach
}

// finish shows the outcome, waits for Ctrl-C with --ui-linger, and stops
// the console.
func (u *uiServer) finish(ctx context.Context, g *Globals, res runner.Result, runErr error) {
	if u.srv == nil {
		return
	}
	u.srv.Finish(res, runErr)
	if u.linger && ctx.Err() == nil {
		fmt.Fprintf(g.Stderr, "console: the run is over; the page stays up at %s until Ctrl-C\n", u.srv.URL())
		<-ctx.Done()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := u.srv.Close(cctx); err != nil {
		g.Logger.Warn("console did not close cleanly", "err", err)
	}
}
