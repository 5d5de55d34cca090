package app

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print drill's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(g.Stdout, "drill %s (%s, %s/%s)\n", g.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
