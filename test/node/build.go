package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
// goBin inside repoRoot/test/controlplane (the module that pins
// k8s.io/kubernetes and lists the three as tools), into BinDir(), taking
// the same lock file as test/controlplane's build so that concurrent
// builds do not interleave. The Go build cache makes a repeat build an
// up-to-date check; the first one compiles most of Kubernetes (measured
// in reports/BENCHMARKS.md). It returns the directory holding the three
// binaries, or an error with the tail of go's output.
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
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("create bin dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(binDir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("open build lock: %w", err)
	}
	defer lock.Close()
	if err := flockContext(ctx, lock); err != nil {
		return "", fmt.Errorf("take build lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too
	for _, name := range []string{BinKubelet, BinKubeProxy, BinScheduler} {
		start := time.Now()
		cmd := exec.CommandContext(ctx, goBin, "build", "-o", filepath.Join(binDir, name), "-ldflags", versionLDFlags(), "k8s.io/kubernetes/cmd/"+name)
		cmd.Dir = moduleDir
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("build %s: %w: %s", name, err, tail(buf.String(), 2000))
		}
		log.Info("built", "binary", name, "seconds", time.Since(start).Seconds())
	}
	return binDir, nil
}

// versionLDFlags stamps the binaries with KubernetesVersion as
// test/controlplane stamps kube-apiserver (the same flags, so that the
// build cache is shared and /version agrees with the release).
func versionLDFlags() string {
	var b strings.Builder
	b.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=37 -X %s.gitTreeState=clean",
			pkg, KubernetesVersion, pkg, pkg, pkg)
	}
	return b.String()
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

// flockContext takes an exclusive flock on f, polling so that ctx can
// cancel the wait.
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
