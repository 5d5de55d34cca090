package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// KubernetesVersion is the k8s.io/kubernetes module version that this module
// pins (go.mod) and builds the control-plane binaries from. It matches the
// client-go version drill uses (v0.37.2).
const KubernetesVersion = "v1.37.2"

// modulePath is this module's path, checked in go.mod to find the module
// directory to build in.
const modulePath = "github.com/drillhq/drill/test/controlplane"

// Binary names, also the last element of their package paths under
// k8s.io/kubernetes/cmd/.
const (
	binAPIServer         = "kube-apiserver"
	binControllerManager = "kube-controller-manager"
)

// defaultBinDir returns the directory that holds the built binaries when
// Options.BinDir is empty: <user cache dir>/drill/controlplane/<version>.
func defaultBinDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find user cache dir: %w", err)
	}
	return filepath.Join(base, "drill", "controlplane", KubernetesVersion), nil
}

// defaultModuleDir returns the directory of this module's source, taken from
// the path this file was compiled from. It fails when the binary was built with
// -trimpath or moved away from its source tree.
func defaultModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("find module dir: runtime.Caller failed")
	}
	dir := filepath.Dir(file)
	if err := checkModuleDir(dir); err != nil {
		return "", fmt.Errorf("find module dir (set Options.ModuleDir): %w", err)
	}
	return dir, nil
}

// checkModuleDir returns an error unless dir holds this module's go.mod.
func checkModuleDir(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("read go.mod: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if strings.TrimSpace(first) != "module "+modulePath {
		return fmt.Errorf("%s/go.mod is not module %s", dir, modulePath)
	}
	return nil
}

// versionLDFlags stamps the binaries with KubernetesVersion, as the upstream
// release build does, so that /version and the emulation version agree with
// the pinned release instead of reading v0.0.0-master.
func versionLDFlags() string {
	major, minor := "1", "37"
	var b strings.Builder
	b.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean",
			pkg, KubernetesVersion, pkg, major, pkg, minor, pkg)
	}
	return b.String()
}

// The node parts, built from k8s.io/kubernetes/cmd/<name> by [BuildNode]
// for test/node's real node.
const (
	BinKubelet   = "kubelet"
	BinKubeProxy = "kube-proxy"
	BinScheduler = "kube-scheduler"
)

// Lock files in the bin dir, one per group of binaries, so that a build of
// the node parts (the kubelet's first build is the longest) never holds up
// a test that needs only the control plane.
const (
	controlPlaneLock = ".build.lock"
	nodeLock         = ".build-node.lock"
)

// buildBinaries runs `go build` for kube-apiserver and kube-controller-manager
// inside moduleDir, writing them to binDir. The Go build cache makes a repeat
// build a quick up-to-date check; the first build compiles all of Kubernetes
// (tens of minutes on a busy 2-core machine). A lock file in binDir serializes
// concurrent builds from several processes. goBin is the go command to run.
// It returns the binary paths, or an error carrying the tail of go's output.
func buildBinaries(ctx context.Context, log *slog.Logger, goBin, moduleDir, binDir string) (apiserver, kcm string, err error) {
	if err := buildLocked(ctx, log, goBin, moduleDir, binDir, controlPlaneLock, binAPIServer, binControllerManager); err != nil {
		return "", "", err
	}
	return filepath.Join(binDir, binAPIServer), filepath.Join(binDir, binControllerManager), nil
}

// Build builds kube-apiserver and kube-controller-manager at
// KubernetesVersion into binDir (the user cache dir's
// drill/controlplane/<version> when empty) from this module's source with
// the go command on PATH, as [Start] does unless Options.SkipBuild, so that
// a later Start finds them up to date. It returns an error with the tail of
// go's output.
func Build(ctx context.Context, log *slog.Logger, binDir string) error {
	log, moduleDir, binDir, err := buildDefaults(log, binDir)
	if err != nil {
		return err
	}
	_, _, err = buildBinaries(ctx, log, "go", moduleDir, binDir)
	return err
}

// BuildNode builds the kubelet, kube-proxy and kube-scheduler as [Build]
// builds the control plane (the same flags, so the build cache is shared
// and /version agrees), under a lock file of their own so that they never
// hold up the control plane's build. It returns the bin dir, or an error
// with the tail of go's output.
func BuildNode(ctx context.Context, log *slog.Logger, binDir string) (string, error) {
	log, moduleDir, binDir, err := buildDefaults(log, binDir)
	if err != nil {
		return "", err
	}
	return binDir, buildLocked(ctx, log, "go", moduleDir, binDir, nodeLock, BinKubelet, BinKubeProxy, BinScheduler)
}

// buildDefaults fills in Build's and BuildNode's defaults: a discarding
// logger, this module's source dir and the default bin dir.
func buildDefaults(log *slog.Logger, binDir string) (*slog.Logger, string, string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	moduleDir, err := defaultModuleDir()
	if err != nil {
		return nil, "", "", err
	}
	if binDir == "" {
		if binDir, err = defaultBinDir(); err != nil {
			return nil, "", "", err
		}
	}
	return log, moduleDir, binDir, nil
}

// buildLocked builds each k8s.io/kubernetes/cmd/<name> of names into
// binDir with goBin inside moduleDir, holding binDir/lockName for the
// whole group.
func buildLocked(ctx context.Context, log *slog.Logger, goBin, moduleDir, binDir, lockName string, names ...string) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("create bin dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(binDir, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open build lock: %w", err)
	}
	defer lock.Close()
	if err := flockContext(ctx, lock); err != nil {
		return fmt.Errorf("take build lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too

	for _, name := range names {
		target := filepath.Join(binDir, name)
		start := time.Now()
		log.Info("building", "binary", name, "into", binDir)
		cmd := exec.CommandContext(ctx, goBin, "build", "-o", target, "-ldflags", versionLDFlags(), "k8s.io/kubernetes/cmd/"+name)
		cmd.Dir = moduleDir
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s: %w: %s", name, err, tail(buf.String(), 2000))
		}
		log.Info("built", "binary", name, "seconds", time.Since(start).Seconds())
	}
	return nil
}

// flockContext takes an exclusive flock on f, polling so that ctx can cancel
// the wait.
func flockContext(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
