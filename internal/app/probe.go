package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/exitcode"
)

// newProbeCommand builds `drill probe URL`: one GET, exit 0 on 2xx and 1
// otherwise, for the HEALTHCHECK of images FROM scratch (no curl there).
func newProbeCommand(g *Globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe URL",
		Short: "GET URL once: exit 0 on a 2xx answer, 1 otherwise (a HEALTHCHECK command for images without curl)",
		Long: `probe sends one GET to URL and exits 0 when the answer is 2xx, 1 on any
other status, a refused or failed connection, or when --timeout (default
5s; the whole exchange) passes first. It prints the status or the error on
one line, which Docker keeps as the healthcheck's output:

  HEALTHCHECK --interval=2s --timeout=3s CMD ["/drill", "probe", "http://localhost:8080/startupz"]`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return &usageError{command: cmd.CommandPath(), err: fmt.Errorf("--timeout must be above 0")}
			}
			if err := compose.Probe(cmd.Context(), args[0], timeout); err != nil {
				return exitcode.Wrap(exitcode.AssertionFailed, err)
			}
			_, err := fmt.Fprintln(g.Stdout, "ok", args[0])
			return err
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", compose.DefaultProbeTimeout, "bound on the whole request")
	return cmd
}
