// Command controlplane starts the test Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager on 127.0.0.1) and keeps it running
// until SIGINT or SIGTERM, then stops it and removes everything it made,
// including the kubeconfig. SIGUSR1 crash-restarts kube-apiserver (same
// port and data, as ControlPlane.RestartAPIServer with grace 0), for
// observer tests; it prints "kube-apiserver restarted" when it is ready again.
// "build" only builds the binaries (and with --node the node parts of
// test/node), as `make test` does ahead of the tests that need them.
//
//	go run ./cmd/controlplane up --kubeconfig /tmp/drill-test.kubeconfig
//	kubectl --kubeconfig /tmp/drill-test.kubeconfig get pods -A
//	go run ./cmd/controlplane build --node
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drillhq/drill/test/controlplane"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

const usage = `usage: controlplane up --kubeconfig PATH [--bin-dir DIR] [--controllers a,b,c] [--skip-build] [--quiet]
       controlplane build [--node] [--only-node] [--bin-dir DIR]

Starts etcd, kube-apiserver and kube-controller-manager (%s) on 127.0.0.1,
writes a kubeconfig (context %q, namespace default) once everything is ready
(so its appearance means ready) and waits for SIGINT or SIGTERM, then stops
everything and removes the kubeconfig and temp files. SIGUSR1 crash-restarts
kube-apiserver and prints "kube-apiserver restarted in N s" once it is ready.

build builds kube-apiserver and kube-controller-manager into --bin-dir (the
user cache dir by default; up does the same first), with --node also the
kubelet, kube-proxy and kube-scheduler of test/node, with --only-node those
three alone, and prints each binary's build time.
`

// run parses args and runs the subcommand, "up" or "build".
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "build" {
		return build(args[1:], stderr)
	}
	if len(args) == 0 || args[0] != "up" {
		fmt.Fprintf(stderr, usage, controlplane.KubernetesVersion, controlplane.ContextName)
		return errors.New("expected the subcommand \"up\" or \"build\"")
	}
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "where to write the kubeconfig (required)")
	binDir := fs.String("bin-dir", "", "directory for the built binaries (default: user cache dir)")
	controllers := fs.String("controllers", strings.Join(controlplane.DefaultControllers, ","), "kube-controller-manager --controllers")
	skipBuild := fs.Bool("skip-build", false, "use the binaries already in --bin-dir")
	quiet := fs.Bool("quiet", false, "log only warnings and errors")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	abs, err := filepath.Abs(*kubeconfig)
	if err != nil {
		return fmt.Errorf("resolve --kubeconfig: %w", err)
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Logger:         log,
		BinDir:         *binDir,
		SkipBuild:      *skipBuild,
		KubeconfigPath: abs,
		Controllers:    strings.Split(*controllers, ","),
	})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	fmt.Fprintf(stdout, "control plane ready in %.1f s at %s\nkubeconfig: %s (context %s)\nlogs: %s\npress Ctrl-C to stop\n",
		time.Since(start).Seconds(), cp.URL(), cp.Kubeconfig(), controlplane.ContextName, cp.Dir())
	restart := make(chan os.Signal, 1)
	signal.Notify(restart, syscall.SIGUSR1)
	defer signal.Stop(restart)
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-restart:
			begin := time.Now()
			if err := cp.RestartAPIServer(ctx, 0); err != nil {
				fmt.Fprintf(stdout, "kube-apiserver restart failed: %v\n", err)
				continue
			}
			fmt.Fprintf(stdout, "kube-apiserver restarted in %.1f s\n", time.Since(begin).Seconds())
		}
	}
	if err := cp.Stop(); err != nil {
		return fmt.Errorf("stop control plane: %w", err)
	}
	fmt.Fprintln(stdout, "control plane stopped")
	return nil
}

// build parses the build subcommand's flags and builds the binaries they
// name, logging each one's build time to stderr.
func build(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binDir := fs.String("bin-dir", "", "directory for the built binaries (default: user cache dir)")
	node := fs.Bool("node", false, "also build the kubelet, kube-proxy and kube-scheduler")
	onlyNode := fs.Bool("only-node", false, "build only the kubelet, kube-proxy and kube-scheduler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("build takes no arguments, got %q", fs.Args())
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if !*onlyNode {
		if err := controlplane.Build(ctx, log, *binDir); err != nil {
			return err
		}
	}
	if *node || *onlyNode {
		if _, err := controlplane.BuildNode(ctx, log, *binDir); err != nil {
			return err
		}
	}
	return nil
}
