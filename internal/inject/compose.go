package inject

import (
	"context"
	"fmt"
	"strings"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/docker"
)

// KindCompose is a Compose project a compose run brought up: its network
// and containers, labelled with the run id. It is journaled before the
// network is created and closed once both are removed; `drill cleanup`
// removes every container and network carrying the run's label.
const KindCompose = "compose"

// ComposeEntry is the journal entry of a compose run's project.
func ComposeEntry(op, run, project string) Entry {
	return Entry{Op: op, Key: "compose:" + project, Kind: KindCompose, Dependency: project}
}

// undoCompose removes the containers and network of e's run by label.
func undoCompose(ctx context.Context, e Entry) (detail string, gone bool, err error) {
	cli, err := docker.Client(ctx)
	if err != nil {
		return "", false, fmt.Errorf("remove the compose project %s of run %s: %w", e.Dependency, e.Run, err)
	}
	defer cli.Close()
	removed, err := compose.RemoveRun(ctx, cli, e.Run)
	if err != nil {
		return strings.Join(removed, ", "), false, fmt.Errorf("remove the compose project %s of run %s: %w", e.Dependency, e.Run, err)
	}
	if len(removed) == 0 {
		return "", true, nil
	}
	return "removed " + strings.Join(removed, ", "), false, nil
}
