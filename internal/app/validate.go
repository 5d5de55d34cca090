package app

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
)

// stdinName names a scenario read from standard input in messages.
const stdinName = "<stdin>"

func newValidateCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check scenario files and print every problem; touches nothing",
		Long: `validate parses and checks each scenario file (and the manifests it points
at) and prints "ok  FILE" for each valid one. Problems are printed one per line
as file:line:col: field.path: message. Exit code 2 when any file is invalid.
FILE "-" reads a scenario from standard input, named <stdin> in messages;
its relative paths (manifests, targets files) resolve against the working
directory.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, path := range args {
				_, name, err := readScenario(g, path)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(g.Stdout, "ok  %s\n", name)
			}
			return exitcode.Wrap(exitcode.BadInput, errors.Join(errs...))
		},
	}
}
