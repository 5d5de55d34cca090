package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
	"github.com/drillhq/drill/internal/testutil/toxiproxyapi"
	"github.com/drillhq/drill/test/node"
)

// Names shared by the tests, the scenarios in scenarios/k8s and their
// manifests.
const (
	contextName = "drill-test" // test/controlplane's kubeconfig context
	namespace   = "drill"      // scenarios/k8s: environment.kubernetes.namespace
	nodeName    = "drill-node" // drill agent's Node
	// kubeletNode is the real node's Node (test/node: kubelet,
	// kube-proxy, containerd). It carries kubeletTaint, so that only pods
	// made for it (onKubelet) are scheduled there, and the agent binds no
	// pod whose nodeSelector names it.
	kubeletNode = "drill-kubelet"
	secretName  = "order-gateway-db"
	proxyName   = "postgres"
)

// kubeletTaint keeps the agent's pods off the real node.
var kubeletTaint = corev1.Taint{Key: "drill.dev/node", Value: "kubelet", Effect: corev1.TaintEffectNoSchedule}

// referenceImage is the image of scenarios/k8s/manifests: on the real node
// drill's static binary alone (FROM scratch) at /drill, PATH=/ so that the
// manifests' command "drill" finds it.
const referenceImage = "docker.io/drill/order-gateway:dev"

// The environment the first test sets up (setupOnce) and TestMain tears
// down: env when it worked, else skipReason (the tests are skipped) or
// envErr (the tests fail).
var (
	setupOnce  sync.Once
	env        *clusterEnv
	skipReason string
	envErr     error
)

// clusterEnv is everything the tests share.
type clusterEnv struct {
	root, tmp string
	goBin     string
	drill     string // built binaries
	toxiproxy string
	cpBin     string
	pause     string

	cp    *proc // test/controlplane CLI (`controlplane up`)
	agent *proc // drill agent
	// node is the real node (nil when it could not start: nodeSkip says
	// why a part is missing here, nodeErr why it failed).
	node     *node.Node
	nodeSkip string
	nodeErr  error
	tp       *proc // toxiproxy-server
	pg       *dependencies.Postgres

	kubeconfig  string
	cs          kubernetes.Interface
	tpURL       string
	proxyListen string            // the Toxiproxy proxy "postgres" in front of pg (the bridge's gateway when the node runs)
	serviceAddr map[string]string // Kubernetes Service -> the agent's proxy host:port
}

// TestMain tears down what the first test set up (setup runs lazily, so
// that -run filters and -short start nothing).
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if env != nil {
		if err := env.teardown(); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: teardown: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// requireEnv returns the shared environment, or skips or fails t when it
// could not be set up.
func requireEnv(t testing.TB) *clusterEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Kubernetes control plane; skipped with -short")
	}
	setupOnce.Do(func() {
		env, skipReason, envErr = setup()
		if envErr != nil {
			fmt.Fprintf(os.Stderr, "cluster: setup failed: %v\n", envErr)
		}
	})
	if skipReason != "" {
		needs.Part(t, "Kubernetes control plane", errors.New(skipReason))
	}
	if envErr != nil {
		t.Fatalf("set up the test cluster: %v", envErr)
	}
	return env
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "cluster: "+format+"\n", a...)
}

// setup builds the binaries and starts the control plane, PostgreSQL,
// toxiproxy-server and drill agent, with the namespace and Secret the
// scenarios need. The returned env (even with an error) is torn down by
// TestMain.
func setup() (e *clusterEnv, skip string, err error) {
	goBin := testproc.FindGo()
	if goBin == "" {
		return nil, "no go command (GOROOT/bin/go, PATH, /usr/local/go/bin/go): cannot build the Kubernetes control plane", nil
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp("", "drill-cluster-test-")
	if err != nil {
		return nil, "", err
	}
	e = &clusterEnv{root: root, tmp: tmp, goBin: goBin, serviceAddr: map[string]string{}}
	begin := time.Now()

	// Builds: drill (static: the same binary runs here and, alone in a
	// FROM scratch image, in the real node's pods), the node's pause
	// binary and toxiproxy-server from drill's module, the control plane
	// CLI from its own module.
	bin := filepath.Join(tmp, "bin")
	e.drill, e.toxiproxy, e.cpBin = filepath.Join(bin, "drill"), filepath.Join(bin, "toxiproxy-server"), filepath.Join(bin, "controlplane")
	e.pause = filepath.Join(bin, "pause")
	for _, b := range []struct{ out, pkg string }{{e.drill, "./cmd/drill"}, {e.pause, "./test/node/pause"}} {
		t0 := time.Now()
		if err := node.BuildStatic(context.Background(), goBin, root, b.pkg, b.out); err != nil {
			return e, "", err
		}
		logf("built %s in %.1f s", filepath.Base(b.out), time.Since(t0).Seconds())
	}
	for _, b := range []struct{ out, pkg, dir string }{
		{e.toxiproxy, "github.com/Shopify/toxiproxy/v2/cmd/server", root},
		{e.cpBin, "./cmd/controlplane", filepath.Join(root, "test", "controlplane")},
	} {
		t0 := time.Now()
		cmd := exec.Command(goBin, "build", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = e.buildEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return e, "", fmt.Errorf("build %s: %v: %s", b.pkg, err, out)
		}
		logf("built %s in %.1f s", filepath.Base(b.out), time.Since(t0).Seconds())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.pg, err = dependencies.StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresBinaries}, nil)
	if errors.Is(err, dependencies.ErrNoPostgres) {
		return e, fmt.Sprintf("no PostgreSQL binaries: %v", err), nil
	}
	if err != nil {
		return e, "", fmt.Errorf("start PostgreSQL: %w", err)
	}
	if err := e.startControlPlane(); err != nil {
		return e, "", err
	}
	e.startNode()
	if err := e.startToxiproxy(); err != nil {
		return e, "", err
	}
	// A fresh deadline: the first control-plane build alone can outlast
	// the one PostgreSQL started under.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.prepareNamespace(ctx); err != nil {
		return e, "", err
	}
	if err := e.startAgent(ctx); err != nil {
		return e, "", err
	}
	logf("environment ready in %.1f s (kubeconfig %s, toxiproxy %s, postgres %s)", time.Since(begin).Seconds(), e.kubeconfig, e.tpURL, e.pg.Addr)
	return e, "", nil
}

// buildEnv is the environment for go builds and the control plane CLI
// (which runs `go build` itself): the go command's directory first in PATH.
func (e *clusterEnv) buildEnv() []string {
	out := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+filepath.Dir(e.goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// ---- processes ----

// proc is a child process with its output in files.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr string
	exited         chan struct{}
}

// startProc starts argv in its own process group, SIGKILLed if the test
// binary dies, with stdout and stderr in files under dir.
func startProc(name, dir string, env []string, argv ...string) (*proc, error) {
	p := &proc{name: name, stdout: filepath.Join(dir, name+".stdout"), stderr: filepath.Join(dir, name+".stderr"), exited: make(chan struct{})}
	so, err := os.Create(p.stdout)
	if err != nil {
		return nil, err
	}
	se, err := os.Create(p.stderr)
	if err != nil {
		so.Close()
		return nil, err
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = so, se
	p.cmd.Env = env
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		so.Close()
		se.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		so.Close()
		se.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends sig and waits up to grace, then SIGKILLs the process group.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	if p == nil || !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return fmt.Errorf("%s did not stop within %s of %s: killed", p.name, grace, sig)
}

// tail returns the last n lines of the process's stderr.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.stderr)
	return testproc.Tail(b, n)
}

// ---- toxiproxy-server ----

func (e *clusterEnv) startToxiproxy() error {
	for attempt := 0; attempt < 3; attempt++ {
		port, err := dependencies.FreePort()
		if err != nil {
			return err
		}
		// No -proxy-metrics: drill then proves the fault is on the path
		// with its canary toxic (a remote server counts a pooled
		// connection's bytes only when it closes).
		p, err := startProc("toxiproxy-server", e.tmp, os.Environ(), e.toxiproxy, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
		if err != nil {
			return err
		}
		e.tp, e.tpURL = p, "http://127.0.0.1:"+strconv.Itoa(port)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) && p.running() {
			if _, err := e.tpAPI().Proxies(); err == nil {
				return e.createPostgresProxy()
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = p.stop(syscall.SIGKILL, time.Second)
	}
	return errors.New("toxiproxy-server did not answer")
}

// tpAPI is a client of the toxiproxy-server's HTTP API.
func (e *clusterEnv) tpAPI() *toxiproxyapi.Client { return &toxiproxyapi.Client{URL: e.tpURL} }

// createPostgresProxy creates the proxy the pods reach PostgreSQL through;
// drill adopts it (same name, listen and upstream in the scenario).
func (e *clusterEnv) createPostgresProxy() error {
	port, err := dependencies.FreePort()
	if err != nil {
		return err
	}
	// Where the real node's pods reach it: the bridge's gateway address
	// (the agent's pods, processes of this machine, reach it there too).
	host := "127.0.0.1"
	if e.node != nil {
		host = e.node.Gateway().String()
	}
	e.proxyListen = net.JoinHostPort(host, strconv.Itoa(port))
	_, err = e.tpAPI().CreateProxy(proxyName, e.proxyListen, e.pg.Addr)
	return err
}

// ---- the real node ----

// startNode builds the kubelet, kube-proxy and kube-scheduler (cached
// under ~/.cache/drill) and starts the real node kubeletNode (test/node)
// with drill's reference image imported. It never fails the setup: a part
// missing here sets nodeSkip, any other error nodeErr, and the tests that
// need the node (requireNode) skip or fail on them while the agent's run.
func (e *clusterEnv) startNode() {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("part", "node")
	t0 := time.Now()
	binDir, err := node.BuildKubernetes(ctx, log, e.goBin, e.root)
	if err != nil {
		e.nodeErr = err
		return
	}
	logf("node parts built or up to date in %.1f s", time.Since(t0).Seconds())
	t0 = time.Now()
	n, err := node.Start(ctx, node.Options{
		Logger: log, Kubeconfig: e.kubeconfig, BinDir: binDir, PauseBinary: e.pause,
		Name: kubeletNode, Taints: []corev1.Taint{kubeletTaint},
		Images: []node.Image{{Ref: referenceImage, Binary: e.drill, Entrypoint: []string{"/drill"}, Env: []string{"PATH=/"}}},
	})
	switch {
	case errors.Is(err, node.ErrMissingPart):
		e.nodeSkip = err.Error()
		logf("no real node: %v", err)
		return
	case err != nil:
		e.nodeErr = err
		logf("the real node did not start: %v", err)
		return
	}
	e.node = n
	logf("real node %s up in %.1f s (gateway %s, containerd %s)", kubeletNode, time.Since(t0).Seconds(), n.Gateway(), n.RuntimeVersion())
}

// requireNode returns the real node, or skips (a part missing here; fails
// under CI=true) or fails t when it did not start.
func (e *clusterEnv) requireNode(t testing.TB) *node.Node {
	t.Helper()
	if e.nodeSkip != "" {
		needs.Part(t, "Kubernetes node (kubelet, containerd, CNI plugins)", errors.New(e.nodeSkip))
	}
	if e.nodeErr != nil {
		t.Fatalf("the real node did not start: %v", e.nodeErr)
	}
	return e.node
}

// ---- control plane ----

func (e *clusterEnv) startControlPlane() error {
	e.kubeconfig = filepath.Join(e.tmp, "kubeconfig")
	// The node lifecycle controller too: it lifts the not-ready taint of
	// the real node's new Node (node.ControlPlaneControllers).
	p, err := startProc("controlplane", e.tmp, e.buildEnv(), e.cpBin, "up", "--kubeconfig", e.kubeconfig, "--quiet",
		"--controllers", strings.Join(node.ControlPlaneControllers, ","))
	if err != nil {
		return err
	}
	e.cp = p
	// The first build of kube-apiserver and kube-controller-manager takes
	// 10-20 minutes on a busy 2-core machine; later ones seconds.
	t0 := time.Now()
	deadline := t0.Add(30 * time.Minute)
	for !testproc.FileExists(e.kubeconfig) {
		if !p.running() {
			return fmt.Errorf("control plane exited before it was ready:\n%s", p.tail(30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("control plane not ready after %s:\n%s", time.Since(t0), p.tail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	logf("control plane ready in %.1f s", time.Since(t0).Seconds())
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	e.cs, err = kubernetes.NewForConfig(cfg)
	return err
}

// restartAPIServer crash-restarts kube-apiserver through the CLI (SIGUSR1)
// and waits until it says the server is ready again.
func (e *clusterEnv) restartAPIServer(timeout time.Duration) (string, error) {
	before, _ := os.ReadFile(e.cp.stdout)
	if err := e.cp.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(e.cp.stdout)
		if len(b) > len(before) {
			for _, l := range strings.Split(string(b[len(before):]), "\n") {
				if strings.HasPrefix(l, "kube-apiserver restarted") {
					return l, nil
				}
				if strings.HasPrefix(l, "kube-apiserver restart failed") {
					return "", errors.New(l)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("kube-apiserver not restarted within %s:\n%s", timeout, e.cp.tail(20))
}

// prepareNamespace creates the scenarios' namespace, waits for its default
// ServiceAccount (pods are refused before it exists) and creates the Secret
// holding the pods' DATABASE_URL (through the Toxiproxy proxy).
func (e *clusterEnv) prepareNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := e.cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for ServiceAccount %s/default: %w", namespace, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace},
		StringData: map[string]string{"url": fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", e.pg.User, e.proxyListen, e.pg.Database)},
	}
	if _, err := e.cs.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Secret %s: %w", secretName, err)
	}
	return nil
}

// ---- drill agent ----

func (e *clusterEnv) startAgent(ctx context.Context) error {
	args := []string{e.drill, "agent", "-v", "--kubeconfig", e.kubeconfig, "--context", contextName,
		"--node", nodeName, "--log-dir", filepath.Join(e.tmp, "podlogs")}
	for _, svc := range []string{"order-gateway", "order-gateway-naive"} {
		port, err := dependencies.FreePort()
		if err != nil {
			return err
		}
		e.serviceAddr[svc] = "127.0.0.1:" + strconv.Itoa(port)
		args = append(args, "--service", namespace+"/"+svc+"="+e.serviceAddr[svc])
	}
	p, err := startProc("agent", e.tmp, os.Environ(), args...)
	if err != nil {
		return err
	}
	e.agent = p
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil && nodeReady(n) {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("drill agent exited:\n%s", p.tail(30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready after a minute (%v):\n%s", nodeName, err, p.tail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// teardown stops everything in reverse order and removes the temp dir.
func (e *clusterEnv) teardown() error {
	var errs []error
	if err := e.agent.stop(syscall.SIGINT, time.Minute); err != nil {
		errs = append(errs, err)
	}
	if e.node != nil {
		if err := e.node.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the real node: %w", err))
		}
	}
	if err := e.tp.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if e.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := e.pg.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop PostgreSQL: %w", err))
		}
		cancel()
	}
	// The CLI stops the controller manager first, then the API server
	// (graceful, SIGKILL after 10 s), etcd, and removes its files.
	if err := e.cp.stop(syscall.SIGINT, 2*time.Minute); err != nil {
		errs = append(errs, err)
	}
	if e.tmp != "" && os.Getenv("DRILL_CLUSTER_KEEP") == "" {
		if err := os.RemoveAll(e.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
