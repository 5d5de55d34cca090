package app

// TEMPORARY: the lead replaces this file with the real run command.

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
)

func newRunCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run FILE",
		Short: "Run the drill a scenario describes",
		Args:  exactArgs(1, "a scenario file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := loadScenario(args[0]); err != nil {
				return err
			}
			return exitcode.Wrap(exitcode.CouldNotRun, errors.New("drill run: not available yet"))
		},
	}
}
