// Package controlplane starts a real Kubernetes control plane on loopback for
// tests: etcd embedded in the calling process, and kube-apiserver and
// kube-controller-manager built from the k8s.io/kubernetes module pinned in
// this module's go.mod (KubernetesVersion) and run as child processes. There is
// no kubelet, scheduler or kube-proxy: pods are bound to nodes by whoever
// creates them (spec.nodeName) and their status is written through the API,
// which is what drill's node agent does in the kubelet's role.
//
// Start builds the binaries (the Go build cache makes that quick after the
// first time), generates a CA, a serving certificate and a service-account key
// pair, starts everything, waits until /readyz answers 200, the controller
// manager's /healthz answers 200 and the default ServiceAccount exists, and
// writes a kubeconfig with one context (ContextName) that authenticates with a
// static bearer token in group system:masters. Stop ends both processes
// (their whole process groups), closes etcd and removes every temporary file.
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ContextName is the name of the only context (and of its cluster and user)
// in the kubeconfig that Start writes. Its namespace is "default".
const ContextName = "drill-test"

// DefaultControllers is the kube-controller-manager --controllers list used
// when Options.Controllers is empty: the EndpointSlice, ReplicaSet and
// Deployment controllers that drill's cluster mode exercises, the
// ServiceAccount controller (the ServiceAccount admission plugin refuses a
// pod, whatever its automountServiceAccountToken, until its namespace's
// "default" ServiceAccount exists), the garbage collector (owner-reference
// cascades, e.g. a Deployment's ReplicaSets and pods) and the namespace
// controller (so deleting a namespace finishes), the Job controller (drill's
// load workers are an Indexed Job: it makes their pods with their completion
// indexes and counts them Succeeded or Failed) and the TTL-after-finished
// controller (it deletes a finished Job drill could not), and the disruption
// controller (it keeps a PodDisruptionBudget's status, which the eviction API
// reads: without it every eviction a budget covers is refused). The node-lifecycle
// controller is deliberately absent: without a kubelet renewing node leases it
// would mark nodes NotReady and evict their pods.
var DefaultControllers = []string{"endpointslice", "replicaset", "deployment", "serviceaccount", "garbagecollector", "namespace", "job", "ttl-after-finished", "disruption"}

// Options configures Start. The zero value is usable.
type Options struct {
	// Logger receives progress (build, start, stop). Nil discards it.
	Logger *slog.Logger
	// BinDir holds the built kube-apiserver and kube-controller-manager.
	// Empty means <user cache dir>/drill/controlplane/<KubernetesVersion>.
	BinDir string
	// ModuleDir is this module's source directory, where `go build` runs.
	// Empty means the directory this package was compiled from.
	ModuleDir string
	// GoBin is the go command used to build. Empty means "go" from PATH.
	GoBin string
	// SkipBuild uses the binaries already in BinDir instead of running
	// `go build`; Start fails if they are missing.
	SkipBuild bool
	// KubeconfigPath is where the kubeconfig is written, as the last step of
	// a successful Start (so its appearance means ready); Stop removes it.
	// Empty means only a file in the temporary directory.
	KubeconfigPath string
	// Controllers is kube-controller-manager's --controllers list.
	// Empty means DefaultControllers.
	Controllers []string
	// ExtraAPIServerArgs and ExtraControllerManagerArgs are appended to the
	// generated flags (a later flag wins over an earlier one).
	ExtraAPIServerArgs         []string
	ExtraControllerManagerArgs []string
	// ReadyTimeout bounds each wait for readiness (etcd, /readyz, /healthz,
	// the default ServiceAccount). Zero means 2 minutes: the shared 2-core
	// machine can be slow. The build is bounded only by ctx.
	ReadyTimeout time.Duration
}

// ControlPlane is a running control plane. Its methods are safe for
// concurrent use.
type ControlPlane struct {
	log          *slog.Logger
	dir          string // temp dir holding certs, tokens, logs, etcd data
	kubeconfig   string
	ownKubecfg   bool // kubeconfig is Options.KubeconfigPath, removed by Stop
	token        string
	apiPort      int
	kcmPort      int
	caPEM        []byte
	readyTimeout time.Duration
	apiBin       string
	apiArgs      []string

	mu   sync.Mutex
	etcd *embed.Etcd
	api  *process
	kcm  *process

	stopOnce sync.Once
	stopErr  error
}

// Start builds (or finds) the binaries and starts etcd, kube-apiserver and
// kube-controller-manager on 127.0.0.1, as described in the package doc. It
// returns once the API server is ready, the controller manager is healthy and
// the "default" ServiceAccount exists in namespace default. On error every
// process it started is stopped and every temporary file removed; the error
// names the step that failed and, when a process died, ends with its log.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	readyTimeout := opts.ReadyTimeout
	if readyTimeout == 0 {
		readyTimeout = 2 * time.Minute
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = defaultBinDir(); err != nil {
			return nil, err
		}
	}
	var apiBin, kcmBin string
	if opts.SkipBuild {
		apiBin, kcmBin = filepath.Join(binDir, binAPIServer), filepath.Join(binDir, binControllerManager)
		for _, b := range []string{apiBin, kcmBin} {
			if _, err := os.Stat(b); err != nil {
				return nil, fmt.Errorf("find prebuilt binary (SkipBuild): %w", err)
			}
		}
	} else {
		moduleDir := opts.ModuleDir
		if moduleDir == "" {
			if moduleDir, err = defaultModuleDir(); err != nil {
				return nil, err
			}
		} else if err := checkModuleDir(moduleDir); err != nil {
			return nil, fmt.Errorf("check module dir: %w", err)
		}
		goBin := opts.GoBin
		if goBin == "" {
			goBin = "go"
		}
		if apiBin, kcmBin, err = buildBinaries(ctx, log, goBin, moduleDir, binDir); err != nil {
			return nil, err
		}
	}

	dir, err := os.MkdirTemp("", "drill-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	cp = &ControlPlane{log: log, dir: dir, readyTimeout: readyTimeout, apiBin: apiBin}
	defer func() {
		if err != nil {
			if stopErr := cp.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			cp = nil
		}
	}()

	p, err := writePKI(dir)
	if err != nil {
		return cp, err
	}
	cp.caPEM = p.caPEM
	if cp.token, err = randomToken(); err != nil {
		return cp, err
	}
	kcmToken, err := randomToken()
	if err != nil {
		return cp, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	// token,user,uid,"group1,group2"
	tokens := fmt.Sprintf("%s,drill-test-admin,drill-test-admin,\"system:masters\"\n"+
		"%s,system:kube-controller-manager,system:kube-controller-manager,\"system:masters\"\n", cp.token, kcmToken)
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return cp, fmt.Errorf("write token file: %w", err)
	}

	ports, err := freePorts(4)
	if err != nil {
		return cp, err
	}
	etcdClientPort, etcdPeerPort := ports[0], ports[1]
	cp.apiPort, cp.kcmPort = ports[2], ports[3]

	log.Info("starting etcd", "port", etcdClientPort)
	e, etcdURL, err := startEtcd(ctx, dir, etcdClientPort, etcdPeerPort, readyTimeout)
	if err != nil {
		return cp, err
	}
	cp.mu.Lock()
	cp.etcd = e
	cp.mu.Unlock()

	cp.apiArgs = append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.apiPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + p.servingCert,
		"--tls-private-key-file=" + p.servingKey,
		"--client-ca-file=" + p.caCert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// The default reconciler would publish the advertise address
		// (loopback) as the kubernetes Service's endpoints, which
		// validation rejects; nothing here needs that Service to route.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}, opts.ExtraAPIServerArgs...)
	if err := cp.startAPIServer(ctx); err != nil {
		return cp, err
	}

	cp.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cp.kubeconfig, cp.URL(), p.caPEM, cp.token); err != nil {
		return cp, err
	}
	kcmKubeconfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	if err := writeKubeconfig(kcmKubeconfig, cp.URL(), p.caPEM, kcmToken); err != nil {
		return cp, err
	}

	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	kcmArgs := append([]string{
		"--kubeconfig=" + kcmKubeconfig,
		"--authentication-kubeconfig=" + kcmKubeconfig,
		"--authorization-kubeconfig=" + kcmKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.kcmPort),
		"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + p.saKey,
		"--root-ca-file=" + p.caCert,
		"--profiling=false",
	}, opts.ExtraControllerManagerArgs...)
	log.Info("starting kube-controller-manager", "port", cp.kcmPort, "controllers", strings.Join(controllers, ","))
	kcm, err := startProcess(binControllerManager, kcmBin, kcmArgs, filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return cp, err
	}
	cp.mu.Lock()
	cp.kcm = kcm
	cp.mu.Unlock()
	kcmURL := fmt.Sprintf("https://127.0.0.1:%d/healthz", cp.kcmPort)
	// The controller manager serves a self-signed certificate: only its
	// health answer is read, never trusted data.
	if err := waitHTTP200(ctx, kcm, kcmURL, nil, "", readyTimeout); err != nil {
		return cp, err
	}

	if err := cp.waitDefaultServiceAccount(ctx); err != nil {
		return cp, err
	}
	if opts.KubeconfigPath != "" {
		// Written last and renamed into place, so that a script may take
		// the file's existence to mean "ready".
		tmp := filepath.Join(dir, "kubeconfig.out")
		if err := writeKubeconfig(tmp, cp.URL(), p.caPEM, cp.token); err != nil {
			return cp, err
		}
		if err := os.Rename(tmp, opts.KubeconfigPath); err != nil {
			// Another filesystem: copy instead (not atomic).
			if err := writeKubeconfig(opts.KubeconfigPath, cp.URL(), p.caPEM, cp.token); err != nil {
				return cp, err
			}
		}
		cp.kubeconfig, cp.ownKubecfg = opts.KubeconfigPath, true
	}
	log.Info("control plane ready", "url", cp.URL(), "kubeconfig", cp.kubeconfig)
	return cp, nil
}

// startAPIServer starts kube-apiserver with cp.apiArgs and waits for /readyz.
func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	cp.log.Info("starting kube-apiserver", "port", cp.apiPort)
	api, err := startProcess(binAPIServer, cp.apiBin, cp.apiArgs, filepath.Join(cp.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.api = api
	cp.mu.Unlock()
	start := time.Now()
	if err := waitHTTP200(ctx, api, cp.URL()+"/readyz", cp.caPEM, cp.token, cp.readyTimeout); err != nil {
		return err
	}
	cp.log.Info("kube-apiserver ready", "seconds", time.Since(start).Seconds())
	return nil
}

// RestartAPIServer stops kube-apiserver and starts it again with the same
// flags, port, certificates and etcd data, waiting for /readyz. grace is how
// long SIGTERM may take before SIGKILL: 0 kills at once, like a crash. A
// graceful stop while clients hold watches can take up to grace: measured
// here, kube-apiserver waited its full 60 s shutdown timeout with the
// controller manager connected. Clients keep working with the same
// kubeconfig; their watches break and must be re-established, as after a
// real API server restart. The controller manager keeps running and
// reconnects by itself.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, grace time.Duration) error {
	cp.mu.Lock()
	api := cp.api
	cp.mu.Unlock()
	if api == nil {
		return errors.New("restart kube-apiserver: not running")
	}
	if err := api.stop(grace); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return cp.startAPIServer(ctx)
}

// waitDefaultServiceAccount waits until the ServiceAccount controller has
// created default/default, which proves the controller manager is working
// against the API server.
func (cp *ControlPlane) waitDefaultServiceAccount(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	deadline := time.Now().Add(cp.readyTimeout)
	for {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			cp.log.Debug("get default ServiceAccount", "err", err)
		}
		if cp.kcm.exited() {
			return cp.kcm.exitError()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for default ServiceAccount: not created after %s: %w", cp.readyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for default ServiceAccount: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Kubeconfig returns the path of the kubeconfig written by Start: one
// context, ContextName, namespace default, bearer-token user in
// system:masters.
func (cp *ControlPlane) Kubeconfig() string { return cp.kubeconfig }

// URL returns the API server's base URL, https://127.0.0.1:<port>.
func (cp *ControlPlane) URL() string { return fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort) }

// Token returns the static bearer token of the admin user (system:masters).
func (cp *ControlPlane) Token() string { return cp.token }

// Dir returns the temporary directory holding certificates, the token file,
// etcd's data and the logs of every component (etcd.log,
// kube-apiserver.log, kube-controller-manager.log). Stop removes it.
func (cp *ControlPlane) Dir() string { return cp.dir }

// PIDs returns the process ids of kube-apiserver and kube-controller-manager
// (0 for one not started). Each is also its process group id.
func (cp *ControlPlane) PIDs() (apiserver, controllerManager int) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.api != nil {
		apiserver = cp.api.pid()
	}
	if cp.kcm != nil {
		controllerManager = cp.kcm.pid()
	}
	return apiserver, controllerManager
}

// RESTConfig returns a client configuration for the admin user, with QPS 50
// and burst 100 (client-go's defaults of 5 and 10 slow tests down).
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            cp.URL(),
		BearerToken:     cp.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.caPEM},
		QPS:             50,
		Burst:           100,
	}
}

// Stop ends kube-controller-manager and kube-apiserver (SIGTERM to each
// process group, SIGKILL after 10 s; a client still holding a watch makes
// the API server use all 10 s), closes etcd and removes the temporary
// directory and a kubeconfig written to Options.KubeconfigPath. It is
// idempotent: later calls return the first call's result. The error joins
// every step that failed, e.g. a process group that still has members.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		var errs []error
		for _, p := range []*process{cp.kcm, cp.api} {
			if p == nil {
				continue
			}
			if err := p.stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if cp.etcd != nil {
			cp.etcd.Close()
		}
		if cp.ownKubecfg && cp.kubeconfig != "" {
			if err := os.Remove(cp.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove kubeconfig: %w", err))
			}
		}
		if err := os.RemoveAll(cp.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove temp dir: %w", err))
		}
		cp.log.Info("control plane stopped", "dir", cp.dir)
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// waitHTTP200 polls url every 250 ms until it answers 200, p exits, timeout
// passes or ctx ends. With caPEM nil the server's certificate is not verified
// (used only for the controller manager's self-signed health endpoint). A
// non-empty token is sent as a bearer token.
func waitHTTP200(ctx context.Context, p *process, url string, caPEM []byte, token string, timeout time.Duration) error {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsCfg.RootCAs = pool
	} else {
		tlsCfg.InsecureSkipVerify = true //nolint:gosec // health probe of a loopback self-signed endpoint
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", url, err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if p.exited() {
			return fmt.Errorf("wait for %s: %w", url, p.exitError())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s: not 200 after %s; last answer: %s", url, timeout, tail(last, 1500))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", url, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// writeKubeconfig writes a kubeconfig with one cluster, user and context, all
// named ContextName, namespace default, authenticating with token.
func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ContextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[ContextName] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[ContextName] = &clientcmdapi.Context{Cluster: ContextName, AuthInfo: ContextName, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = ContextName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// randomToken returns 32 random hex characters.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago (held open together so they differ, then released for the components
// to bind).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
