package node

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KubernetesVersion is the k8s.io/kubernetes version the node parts are
// built from: the one test/controlplane's go.mod pins (checked by
// BuildKubernetes), so that the kubelet, kube-proxy and kube-scheduler
// match the test control plane's kube-apiserver exactly.
const KubernetesVersion = "v1.37.2"

// The node parts built from k8s.io/kubernetes/cmd/<name>.
const (
	BinKubelet   = "kubelet"
	BinKubeProxy = "kube-proxy"
	BinScheduler = "kube-scheduler"
)

// BinDir returns where the Kubernetes binaries are kept, the directory
// test/controlplane builds kube-apiserver into: <user cache
// dir>/drill/controlplane/<KubernetesVersion>.
func BinDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find user cache dir: %w", err)
	}
	return filepath.Join(base, "drill", "controlplane", KubernetesVersion), nil
}

// BuildKubernetes builds the kubelet, kube-proxy and kube-scheduler with
// goBin through test/controlplane's own command (`go run ./cmd/controlplane
// build --only-node` inside repoRoot/test/controlplane, the module that
// pins k8s.io/kubernetes and lists the three as tools), into BinDir(), with
// the control plane's flags and a lock of their own (so a build already
// under way, e.g. make test's prebuild, is waited for, not repeated). The
// Go build cache makes a repeat build an up-to-date check; the first one
// compiles most of Kubernetes (measured in reports/BENCHMARKS.md). It
// returns the directory holding the three binaries, or an error with the
// tail of go's output.
func BuildKubernetes(ctx context.Context, log *slog.Logger, goBin, repoRoot string) (string, error) {
	moduleDir := filepath.Join(repoRoot, "test", "controlplane")
	mod, err := os.ReadFile(filepath.Join(moduleDir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("build node parts: %w", err)
	}
	if !strings.Contains(string(mod), "k8s.io/kubernetes "+KubernetesVersion) {
		return "", fmt.Errorf("build node parts: %s/go.mod does not pin k8s.io/kubernetes %s", moduleDir, KubernetesVersion)
	}
	binDir, err := BinDir()
	if err != nil {
		return "", err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, goBin, "run", "./cmd/controlplane", "build", "--only-node", "--bin-dir", binDir)
	cmd.Dir = moduleDir
	// The command's go is goBin's: put its directory first on PATH.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build node parts: %w: %s", err, tail(buf.String(), 2000))
	}
	if log != nil {
		log.Info("node parts built or up to date", "seconds", time.Since(start).Seconds(), "dir", binDir)
	}
	return binDir, nil
}

// BuildStatic builds the package pkg of the module in dir as a static
// binary (CGO_ENABLED=0, -trimpath) at out, for FROM scratch images.
func BuildStatic(ctx context.Context, goBin, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, tail(string(b), 2000))
	}
	return nil
}
