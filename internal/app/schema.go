package app

import (
	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/scenario"
)

func newSchemaCommand(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the scenario format",
		Long: `schema prints a JSON Schema (draft 2020-12) of the scenario format, for editors
with a YAML language server, e.g.:

  drill schema > drill.schema.json
  # then in a scenario's first line:
  # yaml-language-server: $schema=./drill.schema.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := scenario.JSONSchema()
			if err != nil {
				return err
			}
			_, err = g.Stdout.Write(append(b, '\n'))
			return err
		},
	}
}
