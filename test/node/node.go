// Package node starts a real Kubernetes node on this machine for tests,
// beside the control plane of test/controlplane: the kubelet, kube-proxy
// (iptables mode) and kube-scheduler built from the k8s.io/kubernetes
// module that test/controlplane pins (KubernetesVersion), a containerd
// instance of the node's own (its own root, state dir, socket and config:
// the Docker engine's containerd is left alone) running Debian's runc, and
// pod networking from the CNI bridge, host-local and loopback plugins, so
// that every pod gets its own IP on the bridge BridgeName.
//
// Images come from no registry: the pod sandbox ("pause") image is built
// here from test/node/pause and every image of Options.Images is a static
// binary put in a FROM scratch image (WriteImageArchive), imported into
// containerd's k8s.io namespace. The kubelet's image garbage collection is
// off (imageGCHighThresholdPercent 100), so it cannot remove them.
//
// The node runs as root and takes the machine-wide lock /run/drill-node.lock:
// one node at a time. Start first sweeps what an earlier node whose test
// was killed left behind (see sweep.go); Stop removes what this one made.
//
// Facts found by running it (reports/BENCHMARKS.md, "A real node"):
// kubelet v1.37.2 accepts Debian's containerd 1.6.20 as its CRI runtime
// (it logs that the runtime should implement RuntimeConfig and falls back
// to its own cgroupDriver; v1.38 drops that fallback); on cgroup v1 it
// needs failCgroupV1: false; root here lacks CAP_SYS_RESOURCE, so
// containerd runs with restrict_oom_score_adj; and the control plane must
// run the node lifecycle controller (ControlPlaneControllers), or the new
// Node keeps its not-ready taint and nothing is scheduled.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrMissingPart is wrapped by Start's error when a part the node needs
// does not exist on this machine (not root, no containerd, runc, ctr,
// iptables, ip or CNI plugins); the message names the part and how to get
// it. Tests skip on it (fail under CI=true).
var ErrMissingPart = errors.New("node part missing")

// Defaults of Options.
const (
	DefaultName        = "drill-node"
	DefaultServiceCIDR = "10.0.0.0/24" // test/controlplane's --service-cluster-ip-range
	// PauseImage is the sandbox image containerd's CRI plugin runs for
	// every pod (sandbox_image), built by Start from PauseBinary.
	PauseImage = "registry.k8s.io/pause:drill"
)

// ControlPlaneControllers is the kube-controller-manager --controllers list
// a control plane serving this node needs: test/controlplane's default
// list plus the node lifecycle controller. The API server's
// TaintNodesByCondition admission taints a new Node
// node.kubernetes.io/not-ready:NoSchedule, and only that controller
// removes the taint once the kubelet reports Ready (without it the
// scheduler finds "1 node(s) had untolerated taint(s)" and the pod stays
// Pending). test/controlplane leaves it out because drill agent renews no
// node lease; the kubelet does.
var ControlPlaneControllers = []string{"endpointslice", "replicaset", "deployment", "serviceaccount",
	"garbagecollector", "namespace", "job", "ttl-after-finished", "node-lifecycle-controller"}

// DefaultPodSubnet is the bridge's subnet when Options.PodSubnet is zero:
// the gateway (the bridge's own address, also the node's InternalIP and
// the kubelet's listen address) is its first address, pods get the rest.
var DefaultPodSubnet = netip.MustParsePrefix("10.213.0.0/24")

// Options configures Start.
type Options struct {
	// Logger receives progress. Nil discards it.
	Logger *slog.Logger
	// Kubeconfig is the control plane's kubeconfig (test/controlplane's,
	// a system:masters user); the kubelet, kube-proxy and kube-scheduler
	// all use it. Required.
	Kubeconfig string
	// BinDir holds kubelet, kube-proxy and kube-scheduler
	// (BuildKubernetes returns it). Required.
	BinDir string
	// PauseBinary is the static pause binary (test/node/pause built with
	// BuildStatic). Required.
	PauseBinary string
	// Images are imported into containerd's k8s.io namespace before the
	// kubelet starts.
	Images []Image
	// Containerd and Ctr are containerd's daemon and client binaries;
	// empty means "containerd" and "ctr" from PATH (Debian's 1.6 here).
	Containerd, Ctr string
	// Runc is the OCI runtime containerd's shim runs; empty means "runc"
	// from PATH.
	Runc string
	// CNIBinDir holds the bridge, host-local and loopback plugins; empty
	// means the first of /usr/lib/cni (Debian's
	// containernetworking-plugins) and /opt/cni/bin that holds them.
	CNIBinDir string
	// Name is the Node's name; empty means DefaultName.
	Name string
	// PodSubnet is the bridge's subnet; zero means DefaultPodSubnet.
	PodSubnet netip.Prefix
	// ServiceCIDR is the control plane's Service range (kube-proxy needs
	// it only to tell Service from pod traffic); empty means
	// DefaultServiceCIDR.
	ServiceCIDR string
	// Taints are registered on the Node by the kubelet
	// (registerWithTaints), e.g. a NoSchedule taint that keeps pods meant
	// for another node (drill agent's, on the same control plane) off this
	// one; only pods that tolerate it are scheduled here.
	Taints []corev1.Taint
	// ReadyTimeout bounds each wait (containerd's socket, a health
	// endpoint, the Node's Ready condition). Zero means 2 minutes.
	ReadyTimeout time.Duration
}

// Node is a running node. Stop it when done.
type Node struct {
	log        *slog.Logger
	opts       Options
	dir        string
	lock       *os.File
	gateway    netip.Addr
	sock       string
	cs         kubernetes.Interface
	containerd *process
	kubelet    *process
	proxy      *process
	scheduler  *process
	runtimeVer string
	stopped    bool
}

// Dir returns the node's temp dir: configs, logs (containerd.log,
// kubelet.log, kube-proxy.log, kube-scheduler.log), containerd's root and
// state, the kubelet's root. Stop removes it.
func (n *Node) Dir() string { return n.dir }

// Name returns the Node's name.
func (n *Node) Name() string { return n.opts.Name }

// Gateway returns the bridge's address: the pods' default gateway, the
// Node's InternalIP, where the kubelet listens, and where a test's
// dependencies should listen for pods to reach them.
func (n *Node) Gateway() netip.Addr { return n.gateway }

// RuntimeVersion returns what containerd says it is (`ctr version`'s
// server version), e.g. "1.6.20~ds1".
func (n *Node) RuntimeVersion() string { return n.runtimeVer }

// ContainerdSocket returns the path of the node's containerd socket.
func (n *Node) ContainerdSocket() string { return n.sock }

// Start checks the parts, takes the node lock, sweeps what an earlier
// node left, and starts containerd (images imported), the kubelet (waits
// for its /healthz and the Node's Ready condition), kube-proxy (waits for
// /healthz) and kube-scheduler (waits for /healthz). An error wraps
// ErrMissingPart when a part does not exist here; on any error everything
// started is stopped and swept.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if !opts.PodSubnet.IsValid() {
		opts.PodSubnet = DefaultPodSubnet
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if opts.Kubeconfig == "" || opts.BinDir == "" || opts.PauseBinary == "" {
		return nil, errors.New("start node: Options.Kubeconfig, BinDir and PauseBinary are required")
	}
	if err := findParts(&opts); err != nil {
		return nil, err
	}

	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start node: open %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("start node: another drill node runs on this machine (%s is locked): %w", lockPath, err)
	}
	n = &Node{log: opts.Logger, opts: opts, lock: lock, gateway: opts.PodSubnet.Masked().Addr().Next()}
	defer func() {
		if err != nil {
			if serr := n.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("clean up after the failed start: %w", serr))
			}
			n = nil
		}
	}()

	// We hold the lock: every node dir left is a dead node's.
	if _, err := sweepStale(ctx, n.log); err != nil {
		return n, fmt.Errorf("start node: %w", err)
	}
	chains, err := kubeChains(ctx)
	if err != nil {
		return n, fmt.Errorf("start node: %w", err)
	}
	if len(chains) > 0 {
		return n, fmt.Errorf("start node: KUBE-* iptables chains exist that no drill node left (another kubelet or kube-proxy on this machine?): %v", chains)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", BridgeName)); err == nil {
		return n, fmt.Errorf("start node: interface %s exists and no drill node left it", BridgeName)
	}

	if n.dir, err = os.MkdirTemp("", DirPrefix); err != nil {
		return n, fmt.Errorf("start node: %w", err)
	}
	if err := saveSysctls(n.dir); err != nil {
		return n, fmt.Errorf("start node: %w", err)
	}
	cgs, err := cgroupDirs(filepath.Base(n.dir))
	if err != nil {
		return n, fmt.Errorf("start node: find cgroup hierarchies: %w", err)
	}
	for _, d := range cgs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return n, fmt.Errorf("start node: create cgroup root: %w", err)
		}
	}
	if err := n.makeBridge(ctx); err != nil {
		return n, err
	}
	kcfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return n, fmt.Errorf("start node: read kubeconfig: %w", err)
	}
	if n.cs, err = kubernetes.NewForConfig(kcfg); err != nil {
		return n, fmt.Errorf("start node: %w", err)
	}
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	if err := n.importImages(ctx); err != nil {
		return n, err
	}
	if err := n.startKubelet(ctx); err != nil {
		return n, err
	}
	if err := n.startKubeProxy(ctx); err != nil {
		return n, err
	}
	if err := n.startScheduler(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// Sweep removes what earlier nodes on this machine left behind when their
// test was killed (processes, mounts, the bridge, KUBE-* chains, cgroups,
// changed kernel settings, temp dirs: see sweep.go), as Start does first.
// It takes the node lock for the while, so it fails when a node is
// running. It returns the temp dirs it swept.
func Sweep(ctx context.Context, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sweep: open %s: %w", lockPath, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("sweep: a drill node runs on this machine (%s is locked): %w", lockPath, err)
	}
	return sweepStale(ctx, log)
}

// sweepStale sweeps every node dir; the caller holds the lock.
func sweepStale(ctx context.Context, log *slog.Logger) ([]string, error) {
	var swept []string
	for _, d := range staleDirs() {
		log.Info("sweeping a dead node's leftovers", "dir", d)
		if err := sweepDir(ctx, d); err != nil {
			return swept, fmt.Errorf("sweep %s: %w", d, err)
		}
		swept = append(swept, d)
	}
	return swept, nil
}

// findParts resolves the binaries of opts and checks that the node can run
// here; a missing part is an ErrMissingPart error naming it.
func findParts(opts *Options) error {
	missing := func(part, how string) error {
		return fmt.Errorf("%w: %s (%s)", ErrMissingPart, part, how)
	}
	if os.Geteuid() != 0 {
		return missing("root", "the kubelet, containerd and the CNI plugins run as root")
	}
	look := func(p *string, def, how string) error {
		if *p == "" {
			*p = def
		}
		path, err := exec.LookPath(*p)
		if err != nil {
			return missing(*p, how)
		}
		*p = path
		return nil
	}
	for _, c := range []struct {
		p        *string
		def, how string
	}{
		{&opts.Containerd, "containerd", "Debian's containerd package"},
		{&opts.Ctr, "ctr", "Debian's containerd package"},
		{&opts.Runc, "runc", "Debian's runc package"},
	} {
		if err := look(c.p, c.def, c.how); err != nil {
			return err
		}
	}
	for _, tool := range []string{"ip", "iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return missing(tool, "Debian's iproute2 and iptables packages")
		}
	}
	for _, b := range []string{BinKubelet, BinKubeProxy, BinScheduler} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return fmt.Errorf("start node: %s not built: %w", b, err)
		}
	}
	has := func(dir string) bool {
		for _, p := range []string{"bridge", "host-local", "loopback"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				return false
			}
		}
		return true
	}
	if opts.CNIBinDir == "" {
		for _, d := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
			if has(d) {
				opts.CNIBinDir = d
				break
			}
		}
	}
	if opts.CNIBinDir == "" || !has(opts.CNIBinDir) {
		return missing("CNI plugins bridge, host-local and loopback", "Debian's containernetworking-plugins package, /usr/lib/cni")
	}
	return nil
}

// makeBridge creates BridgeName with the gateway address (the CNI bridge
// plugin adopts an existing bridge and finds its gateway address set) and
// writes the CNI network config.
func (n *Node) makeBridge(ctx context.Context) error {
	gw := netip.PrefixFrom(n.gateway, n.opts.PodSubnet.Bits()).String()
	for _, args := range [][]string{
		{"link", "add", BridgeName, "type", "bridge"},
		{"addr", "add", gw, "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return fmt.Errorf("start node: bridge: %w", err)
		}
	}
	netd := filepath.Join(n.dir, "cni", "net.d")
	if err := os.MkdirAll(netd, 0o755); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "drill-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, BridgeName, filepath.Join(n.dir, "cni", "ipam"), n.opts.PodSubnet.Masked().String(), n.gateway.String())
	return os.WriteFile(filepath.Join(netd, "10-drill-node.conflist"), []byte(conf), 0o644)
}

// startContainerd writes the config of the node's own containerd and
// starts it, waiting until `ctr version` answers on its socket.
func (n *Node) startContainerd(ctx context.Context) error {
	n.sock = filepath.Join(n.dir, "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]q
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    netns_mounts_under_state_dir = true
    # Without CAP_SYS_RESOURCE (this machine's root lacks it) runc cannot
    # lower a sandbox's oom_score_adj to the kubelet's -998: "nsexec:
    # failed to update /proc/self/oom_score_adj: Permission denied". This
    # keeps every container's at or above containerd's own.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = %[6]q
          Root = %[7]q
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[8]q
      conf_dir = %[9]q
      max_conf_num = 1
`, filepath.Join(n.dir, "containerd", "root"), filepath.Join(n.dir, "containerd", "state"), n.sock,
		filepath.Join(n.dir, "containerd", "opt"), PauseImage, n.opts.Runc, filepath.Join(n.dir, "containerd", "runc"),
		n.opts.CNIBinDir, filepath.Join(n.dir, "cni", "net.d"))
	cfgPath := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	start := time.Now()
	p, err := startProcess("containerd", n.opts.Containerd, []string{"--config", cfgPath}, filepath.Join(n.dir, "containerd.log"))
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	n.containerd = p
	deadline := time.Now().Add(n.opts.ReadyTimeout)
	for {
		out, err := exec.CommandContext(ctx, n.opts.Ctr, "--address", n.sock, "version").CombinedOutput()
		if err == nil {
			n.runtimeVer = serverVersion(string(out))
			break
		}
		if p.exited() {
			return fmt.Errorf("start node: %w", p.exitError())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("start node: containerd not answering on %s after %s: %s", n.sock, time.Since(start), tail(string(out), 500))
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.log.Info("containerd ready", "version", n.runtimeVer, "seconds", time.Since(start).Seconds())
	return nil
}

// serverVersion picks the server's Version line of `ctr version`.
func serverVersion(out string) string {
	_, server, ok := strings.Cut(out, "Server:")
	if !ok {
		return ""
	}
	for _, line := range strings.Split(server, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "Version" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// importImages writes the pause image and opts.Images as archives and
// imports them into the k8s.io namespace.
func (n *Node) importImages(ctx context.Context) error {
	imgs := append([]Image{{Ref: PauseImage, Binary: n.opts.PauseBinary, Entrypoint: []string{"/" + filepath.Base(n.opts.PauseBinary)}, User: "65535:65535"}}, n.opts.Images...)
	for i, img := range imgs {
		start := time.Now()
		archive := filepath.Join(n.dir, "image-"+strconv.Itoa(i)+".tar")
		if err := WriteImageArchive(archive, n.dir, img); err != nil {
			return fmt.Errorf("start node: %w", err)
		}
		_, err := run(ctx, n.opts.Ctr, "--address", n.sock, "--namespace", "k8s.io", "images", "import", archive)
		os.Remove(archive)
		if err != nil {
			return fmt.Errorf("start node: import %s: %w", img.Ref, err)
		}
		n.log.Info("image imported", "ref", img.Ref, "seconds", time.Since(start).Seconds())
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startKubelet writes the kubelet's config and starts it, waiting for its
// /healthz and for the Node's Ready condition.
func (n *Node) startKubelet(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 machines: the kubelet refuses them unless told not to.
failCgroupV1: false
cgroupDriver: cgroupfs
# The node's own cgroup tree (made by Start, removed by Stop).
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: %[4]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
failSwapOn: false
# 100 turns image garbage collection off: the images come from no registry.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: %[6]q
resolvConf: ""
serializeImagePulls: false
`, filepath.Base(n.dir), n.sock, n.gateway, port, healthz, filepath.Join(n.dir, "pod-logs"))
	if len(n.opts.Taints) > 0 {
		cfg += "registerWithTaints:\n"
		for _, t := range n.opts.Taints {
			cfg += fmt.Sprintf("  - key: %q\n    value: %q\n    effect: %q\n", t.Key, t.Value, t.Effect)
		}
	}
	cfgPath := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + n.opts.Kubeconfig,
		"--hostname-override=" + n.opts.Name,
		"--node-ip=" + n.gateway.String(),
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet-pki"),
		"--v=2",
	}
	start := time.Now()
	p, err := startProcess(BinKubelet, filepath.Join(n.opts.BinDir, BinKubelet), args, filepath.Join(n.dir, "kubelet.log"))
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	n.kubelet = p
	if err := waitHTTP200(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz), n.opts.ReadyTimeout); err != nil {
		return fmt.Errorf("start node: kubelet: %w", err)
	}
	deadline := time.Now().Add(n.opts.ReadyTimeout)
	for {
		node, err := n.cs.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
		last := ""
		if err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					if c.Status == corev1.ConditionTrue {
						n.log.Info("kubelet ready", "node", n.opts.Name, "kubelet", node.Status.NodeInfo.KubeletVersion,
							"runtime", node.Status.NodeInfo.ContainerRuntimeVersion, "seconds", time.Since(start).Seconds())
						return nil
					}
					last = c.Reason + ": " + c.Message
				}
			}
		} else {
			last = err.Error()
		}
		if p.exited() {
			return fmt.Errorf("start node: %w", p.exitError())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("start node: Node %s not Ready after %s: %s", n.opts.Name, n.opts.ReadyTimeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// startKubeProxy starts kube-proxy in iptables mode, waiting for its
// /healthz.
func (n *Node) startKubeProxy(ctx context.Context) error {
	healthz, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + n.opts.Kubeconfig,
		"--hostname-override=" + n.opts.Name,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + n.opts.PodSubnet.Masked().String(),
		"--healthz-bind-address=127.0.0.1:" + strconv.Itoa(healthz),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
		// Leave the machine's conntrack table size and route_localnet
		// alone.
		"--conntrack-max-per-core=0",
		"--iptables-localhost-nodeports=false",
		"--v=2",
	}
	start := time.Now()
	p, err := startProcess(BinKubeProxy, filepath.Join(n.opts.BinDir, BinKubeProxy), args, filepath.Join(n.dir, "kube-proxy.log"))
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	n.proxy = p
	if err := waitHTTP200(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz), n.opts.ReadyTimeout); err != nil {
		return fmt.Errorf("start node: kube-proxy: %w", err)
	}
	n.log.Info("kube-proxy ready", "seconds", time.Since(start).Seconds())
	return nil
}

// startScheduler starts kube-scheduler, waiting for its /healthz.
func (n *Node) startScheduler(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + n.opts.Kubeconfig,
		"--authentication-kubeconfig=" + n.opts.Kubeconfig,
		"--authorization-kubeconfig=" + n.opts.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(n.dir, "scheduler-pki"),
		"--leader-elect=false",
		"--profiling=false",
	}
	start := time.Now()
	p, err := startProcess(BinScheduler, filepath.Join(n.opts.BinDir, BinScheduler), args, filepath.Join(n.dir, "kube-scheduler.log"))
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	n.scheduler = p
	if err := waitHTTP200(ctx, p, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), n.opts.ReadyTimeout); err != nil {
		return fmt.Errorf("start node: kube-scheduler: %w", err)
	}
	n.log.Info("kube-scheduler ready", "seconds", time.Since(start).Seconds())
	return nil
}

// Stop stops kube-scheduler, kube-proxy and the kubelet (SIGTERM, SIGKILL
// after 10 s), then sweeps the node: pods' processes, containerd and its
// shims killed, mounts detached, the bridge and its veths deleted, KUBE-*
// chains removed, the cgroup root removed, the kernel settings the kubelet
// changed put back, the temp dir removed; then it releases the lock. The
// Node object stays in the API (the control plane's to delete). The error
// joins every step that failed; later calls return nil.
func (n *Node) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	for _, p := range []*process{n.scheduler, n.proxy, n.kubelet} {
		if p != nil {
			if err := p.stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if n.dir != "" {
		if err := sweepDir(ctx, n.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if n.containerd != nil {
		// Killed by the sweep; reap it.
		if err := n.containerd.stop(0); err != nil {
			errs = append(errs, err)
		}
	}
	if n.lock != nil {
		n.lock.Close()
	}
	return errors.Join(errs...)
}
