// Package dockertest holds test helpers about what a compose run leaves on
// the Docker engine.
package dockertest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/compose"
)

// Leftovers lists, one per line, the containers ("container NAME STATE")
// and networks ("network NAME") on the engine labelled with run's id
// (compose.LabelRun); "" when none is left. It fails t when the docker CLI
// fails.
func Leftovers(t *testing.T, run string) string {
	t.Helper()
	var out []string
	for _, args := range [][]string{
		{"ps", "-a", "--filter", "label=" + compose.LabelRun + "=" + run, "--format", "container {{.Names}} {{.State}}"},
		{"network", "ls", "--filter", "label=" + compose.LabelRun + "=" + run, "--format", "network {{.Name}}"},
	} {
		b, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n")
}
