package inject

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/drillhq/drill/internal/docker"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// echoMain is a static TCP echo server for a FROM scratch image (the engine
// here has no registry, so no base image can be pulled).
const echoMain = `package main

import (
	"io"
	"net"
)

func main() {
	ln, err := net.Listen("tcp", ":7000")
	if err != nil {
		panic(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			panic(err)
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}
`

// buildEchoImage compiles echoMain statically and builds a FROM scratch
// image tagged tag through the Docker API.
func buildEchoImage(t *testing.T, ctx context.Context, cli client.APIClient, tag string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(echoMain), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "echo")
	cmd := exec.Command("go", "build", "-o", bin, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build echo server: %v: %s", err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("Dockerfile", 0o644, []byte("FROM scratch\nCOPY echo /echo\nEXPOSE 7000\nENTRYPOINT [\"/echo\"]\n"))
	add("echo", 0o755, exe)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("build image: %v", err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if bytes.Contains(out, []byte(`"errorDetail"`)) {
		t.Fatalf("build image: %s", out)
	}
}

func TestContainerPause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := docker.Client(ctx)
	if errors.Is(err, docker.ErrNoDocker) {
		needs.Part(t, "Docker engine (container-pause)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	tag := "drill-test-echo:" + suffix
	buildEchoImage(t, ctx, cli, tag)
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})

	port := network.MustParsePort("7000/tcp")
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   "drill-test-echo-" + suffix,
		Config: &container.Config{Image: tag, ExposedPorts: network.PortSet{port: {}}},
		HostConfig: &container.HostConfig{PortBindings: network.PortMap{
			port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: ""}},
		}},
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	id := created.ID
	removed := false
	remove := func() {
		if !removed {
			_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
			removed = true
		}
	}
	t.Cleanup(remove)
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	ins, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindings := ins.Container.NetworkSettings.Ports[port]
	if len(bindings) == 0 {
		t.Fatalf("no host port for %v", port)
	}
	addr := net.JoinHostPort("127.0.0.1", bindings[0].HostPort)

	// Connect (the engine's proxy accepts before the server does; retry
	// until an echo comes back).
	var conn net.Conn
	var rd *bufio.Reader
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err = net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			rd = bufio.NewReader(conn)
			conn.SetDeadline(time.Now().Add(time.Second))
			_, err = conn.Write([]byte("hello\n"))
			if err == nil {
				_, err = rd.ReadString('\n')
			}
			if err == nil {
				break
			}
			conn.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo container at %s never answered: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer conn.Close()

	env, _ := testEnv(t, nil)
	env.Containers = map[string]string{"echo": id}
	rev := inject(t, scenario.Fault{Name: "freeze", Type: scenario.FaultContainerPause, Dependency: "echo"}, env)
	if ins, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err != nil || !ins.Container.State.Paused {
		t.Fatalf("container not paused: %v", err)
	}
	conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := rd.ReadString('\n'); err == nil {
		t.Fatalf("paused container answered %q", line)
	}
	revert(t, rev)
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ping" {
		t.Fatalf("after unpause: %q %v (the held connection should resume)", line, err)
	}
	assertClean(t, nil, env)

	remove()
	if _, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("container still exists after removal: %v", err)
	}
}
