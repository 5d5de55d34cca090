package app

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/plan"
)

type planFlags struct {
	output string
}

func newPlanCommand(g *Globals) *cobra.Command {
	flags := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Print the timeline a run of the scenario would carry out; touches nothing",
		Long: `plan prints what is brought up before t+0 (dependencies, each service's setup
step, replicas and probe timing), when each stream starts and stops, each fault
turns on and off, each window begins and ends, and which assertion judges which
window (a restarts assertion with includeStartup also counts the bring-up).
Times are offsets from t+0, the moment load starts. FILE "-" reads the scenario
from standard input.`,
		Args: exactArgs(1, "a scenario file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(g, flags, args[0])
		},
	}
	cmd.Flags().StringVarP(&flags.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func runPlan(g *Globals, flags *planFlags, path string) error {
	if flags.output != "text" && flags.output != "json" {
		return &usageError{command: "drill plan", err: fmt.Errorf("invalid --output %q; known: json, text", flags.output)}
	}
	s, _, err := readScenario(g, path)
	if err != nil {
		return err
	}
	p, err := plan.Build(s)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, err)
	}
	if flags.output == "json" {
		enc := json.NewEncoder(g.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	if err := plan.Print(g.Stdout, p); err != nil {
		return fmt.Errorf("print plan: %w", err)
	}
	return nil
}
