package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// TestNodeRunsReadyPod brings up the test control plane and a real node
// (containerd, kubelet, kube-proxy, kube-scheduler), runs one order-gateway
// pod of drill's FROM scratch reference image behind a Service, and checks
// what the real parts did: the scheduler bound the pod, the kubelet ran it
// with its own IP on the bridge and marked it Ready through its startup,
// liveness and readiness probes, the EndpointSlice controller published it
// ready, and kube-proxy routes the Service's ClusterIP to it. PostgreSQL
// listens on loopback; a relay on the bridge's gateway address lets the
// pod reach it. Stop must leave no process, mount, bridge, KUBE-* chain,
// cgroup or temp dir behind.
func TestNodeRunsReadyPod(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a Kubernetes node; skipped with -short")
	}
	goBin := testproc.FindGo()
	if goBin == "" {
		needs.Part(t, "go command", errors.New("no go command: cannot build the node parts"))
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	timings := map[string]time.Duration{}
	mark := func(name string, t0 time.Time) { timings[name] = time.Since(t0) }

	// Builds: the node parts (first build: tens of minutes), the control
	// plane CLI, and the static pause and drill binaries for the images.
	t0 := time.Now()
	binDir, err := BuildKubernetes(ctx, log, goBin, root)
	if err != nil {
		t.Fatalf("build node parts: %v", err)
	}
	mark("build node parts", t0)
	cpBin, pause, drill := filepath.Join(tmp, "controlplane"), filepath.Join(tmp, "pause"), filepath.Join(tmp, "drill")
	t0 = time.Now()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", cpBin, "./cmd/controlplane")
	cmd.Dir = filepath.Join(root, "test", "controlplane")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the control plane CLI: %v: %s", err, out)
	}
	for _, b := range []struct{ pkg, out string }{{"./test/node/pause", pause}, {"./cmd/drill", drill}} {
		if err := BuildStatic(ctx, goBin, root, b.pkg, b.out); err != nil {
			t.Fatal(err)
		}
	}
	mark("build CLI, pause, drill", t0)

	pg, err := dependencies.StartPostgres(ctx, scenario.PostgresDep{Mode: scenario.PostgresBinaries}, nil)
	if errors.Is(err, dependencies.ErrNoPostgres) {
		needs.Part(t, "PostgreSQL server binaries", err)
	}
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	defer pg.Close(context.Background())

	kubeconfig := filepath.Join(tmp, "kubeconfig")
	t0 = time.Now()
	stopCP := startControlPlane(t, ctx, cpBin, kubeconfig, filepath.Join(tmp, "controlplane.log"), goBin)
	defer stopCP()
	mark("control plane up", t0)

	sysctlsBefore, socketsBefore := readSysctls(t), shimSockets()
	t0 = time.Now()
	n, err := Start(ctx, Options{
		Logger: log, Kubeconfig: kubeconfig, BinDir: binDir, PauseBinary: pause,
		Images: []Image{{Ref: "docker.io/library/drill-reference:local", Binary: drill, Entrypoint: []string{"/drill"}, Cmd: []string{"version"}}},
	})
	if errors.Is(err, ErrMissingPart) {
		needs.Part(t, "Kubernetes node", err)
	}
	if err != nil {
		t.Fatalf("start the node: %v", err)
	}
	mark("node up (containerd, images, kubelet Ready, kube-proxy, scheduler)", t0)
	dir := n.Dir()
	stopped := false
	defer func() {
		if !stopped {
			if err := n.Stop(); err != nil {
				t.Errorf("stop the node: %v", err)
			}
		}
	}()

	relay, err := startRelay(n.Gateway(), pg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	t.Logf("node %s: kubelet %s, runtime %s (containerd says %s), OS %s, kernel %s",
		n.Name(), info.KubeletVersion, info.ContainerRuntimeVersion, n.RuntimeVersion(), info.OSImage, info.KernelVersion)
	if info.KubeletVersion != KubernetesVersion {
		t.Errorf("kubelet version %q, want %s", info.KubeletVersion, KubernetesVersion)
	}

	// One order-gateway pod (correct build) and its Service.
	const ns = "default"
	dsn := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pg.User, relay.Addr(), pg.Database)
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds: period, TimeoutSeconds: 1, FailureThreshold: failures,
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "order-gateway-0", Labels: map[string]string{"app": "order-gateway"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(5)),
			Containers: []corev1.Container{{
				Name:            "order-gateway",
				Image:           "drill-reference:local",
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"serve", "order-gateway", "--build", "correct", "--listen", "0.0.0.0:8080"},
				Env:             []corev1.EnvVar{{Name: "DATABASE_URL", Value: dsn}},
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				StartupProbe:    probe("/healthz/startup", 1, 60),
				LivenessProbe:   probe("/healthz/live", 2, 3),
				ReadinessProbe:  probe("/healthz/ready", 1, 3),
			}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "order-gateway"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "order-gateway"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if svc, err = cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err = cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning && podReady(got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not Running and Ready after 3 minutes: %s\nkubelet log:\n%s", describe(got), logTail(dir, "kubelet.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	mark("pod created to Ready", t0)
	ip, err := netip.ParseAddr(got.Status.PodIP)
	if err != nil || !DefaultPodSubnet.Contains(ip) || ip == n.Gateway() {
		t.Errorf("pod IP %q: want an address of %s other than the gateway %s", got.Status.PodIP, DefaultPodSubnet, n.Gateway())
	}
	if got.Spec.NodeName != n.Name() {
		t.Errorf("pod bound to %q, want %q", got.Spec.NodeName, n.Name())
	}
	if cst := got.Status.ContainerStatuses; len(cst) != 1 || cst[0].RestartCount != 0 || !strings.HasPrefix(cst[0].ContainerID, "containerd://") {
		t.Errorf("container statuses: %+v", cst)
	}
	t.Logf("pod %s on %s, IP %s, container %s", got.Name, got.Spec.NodeName, got.Status.PodIP, got.Status.ContainerStatuses[0].ContainerID)

	// The EndpointSlice controller publishes it ready; kube-proxy routes
	// the ClusterIP to it.
	t0 = time.Now()
	for {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=order-gateway"})
		if err == nil && readyEndpoint(slices.Items, got.Status.PodIP) {
			break
		}
		if time.Since(t0) > time.Minute {
			t.Fatalf("no ready endpoint %s in the Service's EndpointSlices after 1 minute", got.Status.PodIP)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, target := range []string{got.Status.PodIP + ":8080", svc.Spec.ClusterIP + ":80"} {
		url := "http://" + target + "/healthz/ready"
		var status int
		deadline := time.Now().Add(time.Minute)
		for {
			status = httpStatus(url)
			if status == http.StatusOK || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if status != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200\nkube-proxy log:\n%s", url, status, logTail(dir, "kube-proxy.log"))
		}
	}
	mark("pod Ready to answering through the ClusterIP", t0)

	if os.Getenv(envHold) == "1" {
		// The child of TestNodeSweptAfterKill: say where everything is
		// and wait to be killed.
		fmt.Printf("%s dir=%s tmp=%s pg=%s\n", holdMarker, dir, tmp, pg.Dir)
		time.Sleep(10 * time.Minute)
		t.Fatal("not killed within 10 minutes")
	}

	// Stop must leave nothing of the node behind.
	t0 = time.Now()
	stopped = true
	if err := n.Stop(); err != nil {
		t.Errorf("stop the node: %v", err)
	}
	mark("node stop and sweep", t0)
	checkClean(t, ctx, dir)
	if after := readSysctls(t); fmt.Sprint(after) != fmt.Sprint(sysctlsBefore) {
		t.Errorf("kernel settings after Stop %v, before Start %v", after, sysctlsBefore)
	}
	checkNoNewSockets(t, socketsBefore)
	for _, k := range []string{"build node parts", "build CLI, pause, drill", "control plane up",
		"node up (containerd, images, kubelet Ready, kube-proxy, scheduler)", "pod created to Ready",
		"pod Ready to answering through the ClusterIP", "node stop and sweep"} {
		t.Logf("timing: %-70s %6.1f s", k, timings[k].Seconds())
	}
}

// checkClean fails t for anything of the node with temp dir dir still on
// the machine.
func checkClean(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node dir %s still exists (%v)", dir, err)
	}
	if m := mountsUnder(dir); m != 0 {
		t.Errorf("%d mounts left under %s", m, dir)
	}
	if linkExists(BridgeName) {
		t.Errorf("bridge %s still exists", BridgeName)
	}
	if chains, err := kubeChains(ctx); err != nil || len(chains) > 0 {
		t.Errorf("KUBE-* chains left: %v (%v)", chains, err)
	}
	cgs, _ := cgroupDirs(filepath.Base(dir))
	for _, d := range cgs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still exists", d)
		}
	}
	if err := killByCmdline(dir); err != nil {
		t.Errorf("processes left: %v", err)
	}
}

// envHold makes TestNodeRunsReadyPod, run as TestNodeSweptAfterKill's
// child, print holdMarker once its pod answers and wait to be killed.
const (
	envHold    = "DRILL_NODE_TEST_HOLD"
	holdMarker = "DRILL-NODE-HELD"
)

// TestNodeSweptAfterKill runs TestNodeRunsReadyPod in a child test
// process, SIGKILLs it once its pod answers through the Service, checks
// that the node's leftovers are there (the pod's shim outlives the test:
// it runs in a session of its own; mounts, bridge, KUBE-* chains), and
// that Sweep, as the next Start does, removes every one of them.
func TestNodeSweptAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a Kubernetes node; skipped with -short")
	}
	if os.Getenv(envHold) != "" {
		t.Skip("the child test process runs TestNodeRunsReadyPod only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	sysctlsBefore, socketsBefore := readSysctls(t), shimSockets()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNodeRunsReadyPod$", "-test.v", "-test.count=1", "-test.timeout=45m")
	cmd.Env = append(os.Environ(), envHold+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); pw.Close() }()
	fields := map[string]string{}
	buf := make([]byte, 64<<10)
	var pending string
	for len(fields) == 0 {
		k, err := pr.Read(buf)
		out.Write(buf[:k])
		pending += string(buf[:k])
		for {
			line, rest, ok := strings.Cut(pending, "\n")
			if !ok {
				break
			}
			pending = rest
			if strings.HasPrefix(line, holdMarker+" ") {
				for _, f := range strings.Fields(line)[1:] {
					k, v, _ := strings.Cut(f, "=")
					fields[k] = v
				}
			}
		}
		if err != nil {
			o := out.String()
			if strings.Contains(o, "--- SKIP: TestNodeRunsReadyPod") {
				t.Skipf("the child test skipped:\n%s", tail(o, 2000))
			}
			t.Fatalf("the child test ended before its pod answered:\n%s", tail(o, 6000))
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	dir := fields["dir"]
	// The child's t.TempDir() is <tmp>/TestNodeRunsReadyPod<n>/001;
	// PostgreSQL's dir is in the temp dir too. Nothing else is removed.
	for _, d := range []string{filepath.Dir(fields["tmp"]), fields["pg"]} {
		if strings.HasPrefix(d, os.TempDir()+"/") {
			defer os.RemoveAll(d)
		}
	}
	if b, err := os.ReadFile(filepath.Join(fields["tmp"], "controlplane.log")); err == nil {
		// The control plane CLI's temp dir, left by its SIGKILL.
		if _, after, ok := strings.Cut(string(b), "logs: "); ok {
			if cpDir, _, _ := strings.Cut(after, "\n"); strings.HasPrefix(cpDir, os.TempDir()) {
				defer os.RemoveAll(cpDir)
			}
		}
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Its children die with it (PDEATHSIG): the kubelet, containerd,
	// kube-proxy, the scheduler, the control plane, PostgreSQL.
	time.Sleep(3 * time.Second)

	if b, err := os.ReadFile(filepath.Join(dir, "kubelet.log")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "RuntimeConfig") || strings.Contains(line, "cgroup v1") {
				t.Logf("kubelet: %s", tail(line, 400))
			}
		}
	}
	shims := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), dir) {
			shims++
		}
	}
	byTool, _ := kubeChains(ctx)
	chains := 0
	for _, c := range byTool {
		chains += len(c)
	}
	t.Logf("left by the killed test: %d processes naming %s, %d mounts under it, bridge %v, %d KUBE-* chains",
		shims, dir, mountsUnder(dir), linkExists(BridgeName), chains)
	if shims == 0 || mountsUnder(dir) == 0 || !linkExists(BridgeName) || chains == 0 {
		t.Errorf("expected the killed node's shim, mounts, bridge and chains to be left for the sweep to remove")
	}

	swept, err := Sweep(ctx, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	found := false
	for _, d := range swept {
		found = found || d == dir
	}
	if !found {
		t.Errorf("Sweep swept %v, not %s", swept, dir)
	}
	checkClean(t, ctx, dir)
	if after := readSysctls(t); fmt.Sprint(after) != fmt.Sprint(sysctlsBefore) {
		t.Errorf("kernel settings after Sweep %v, before the child's Start %v", after, sysctlsBefore)
	}
	checkNoNewSockets(t, socketsBefore)
}

// shimSockets returns the paths in ShimSocketDir, CNICacheDir,
// ContainerLogLinks and DevicePluginsSocket's dir: the files a node
// leaves outside its own dir.
func shimSockets() map[string]bool {
	out := map[string]bool{}
	for _, d := range []string{ShimSocketDir, CNICacheDir, ContainerLogLinks, filepath.Dir(DevicePluginsSocket)} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			out[filepath.Join(d, e.Name())] = true
		}
	}
	return out
}

// checkNoNewSockets fails t for a file of shimSockets' dirs that was not
// there before.
func checkNoNewSockets(t *testing.T, before map[string]bool) {
	t.Helper()
	for s := range shimSockets() {
		if !before[s] {
			t.Errorf("%s left", s)
		}
	}
}

// readSysctls returns the kernel settings the kubelet changes.
func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range kernelSettings {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readyEndpoint(slices []discoveryv1.EndpointSlice, ip string) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				for _, a := range e.Addresses {
					if a == ip {
						return true
					}
				}
			}
		}
	}
	return false
}

func describe(p *corev1.Pod) string {
	if p == nil {
		return "(no pod)"
	}
	return fmt.Sprintf("phase %s, node %q, conditions %+v, containers %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions, p.Status.ContainerStatuses)
}

func logTail(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return tail(string(b), 4000)
}

func httpStatus(url string) int {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// startControlPlane runs test/controlplane's CLI (`controlplane up`) until
// it has written kubeconfig, and returns the function that stops it.
func startControlPlane(t *testing.T, ctx context.Context, bin, kubeconfig, logPath, goBin string) func() {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "up", "--kubeconfig", kubeconfig, "--quiet", "--controllers", strings.Join(ControlPlaneControllers, ","))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	// The first build of kube-apiserver and kube-controller-manager takes
	// tens of minutes on a busy 2-core machine.
	for !testproc.FileExists(kubeconfig) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("control plane exited before it was ready:\n%s", tail(string(b), 3000))
		case <-ctx.Done():
			stop()
			t.Fatalf("control plane not ready: %v", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return stop
}

// relay forwards TCP connections accepted on the bridge's gateway address
// to a loopback address (PostgreSQL), so that pods reach a dependency that
// listens on 127.0.0.1 only.
type relay struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startRelay(gateway netip.Addr, to string) (*relay, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway.String(), "0"))
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	r := &relay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer c.Close()
				u, err := net.DialTimeout("tcp", to, 5*time.Second)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }() //nolint:errcheck
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return r, nil
}

func (r *relay) Addr() string { return r.ln.Addr().String() }

// Close stops accepting; open connections end when either side closes.
func (r *relay) Close() { r.ln.Close() }

// testWriter sends the node's progress log to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
