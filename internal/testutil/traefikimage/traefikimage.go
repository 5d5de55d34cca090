// Package traefikimage gives tests the image of Traefik the compose drills
// run (drill-traefik:<version>), building it as `make compose-images`
// does when the engine does not have it: build/traefik.sh compiles
// Traefik from its Go module once per version (the binary is cached under
// ~/.cache/drill/traefik/<version>), then the image is built FROM scratch
// around it. An image already tagged with the version is reused.
package traefikimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drillhq/drill/internal/compose"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// Version is the Traefik version the compose drills pin (the Makefile's
// TRAEFIK_VERSION, build/traefik.sh's default, the Compose files' image).
const Version = "v3.6.12"

// Image is the tag of the image for Version.
const Image = "drill-traefik:" + Version

var (
	mu   sync.Mutex
	done = map[string]error{} // version -> the outcome of this process's one attempt
)

// Ensure makes Image present in cli's engine, building it from the
// repository at root when it is missing, at most once per process. A build
// that fails fails tb under CI=true and skips it elsewhere
// ([needs.Part]), with go's output.
func Ensure(tb testing.TB, ctx context.Context, cli compose.Docker, root string) {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	err, tried := done[Version]
	if !tried {
		err = ensure(ctx, cli, root, tb.TempDir())
		done[Version] = err
	}
	needs.Part(tb, "Traefik "+Version+" image "+Image+" (make compose-images)", err)
}

func ensure(ctx context.Context, cli compose.Docker, root, work string) error {
	if _, err := cli.ImageInspect(ctx, Image); err == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "build", "traefik.sh"), Version)
	cmd.Env = append(os.Environ(), "GO="+testproc.GoTool())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("build/traefik.sh %s: %w\n%s", Version, err, testproc.Tail(stderr.Bytes(), 20))
	}
	bin := strings.TrimSpace(string(out))
	b, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read the built Traefik: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, "traefik"), b, 0o755); err != nil {
		return err
	}
	df, err := os.ReadFile(filepath.Join(root, "build", "traefik.Dockerfile"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "Dockerfile"), df, 0o644); err != nil {
		return err
	}
	if err := compose.BuildImage(ctx, cli, work, "Dockerfile", Image, nil); err != nil {
		return fmt.Errorf("build %s: %w", Image, err)
	}
	return nil
}
