// Package nodeagent is drill's node agent: the local runtime in the
// kubelet's role, for a Kubernetes control plane that has no kubelet (the
// test control plane of test/controlplane, or any API server a team can
// reach). It lets a team run its real Deployment manifest and its real
// binary through the real control plane on one machine.
//
// An [Agent]:
//
//   - registers a Node (condition Ready, InternalIP [DefaultNodeIP]) and
//     refreshes its status every [Config.HeartbeatPeriod];
//   - binds every Pending pod that has no spec.nodeName to itself through the
//     pods/binding subresource (there is no scheduler);
//   - runs each pod bound to it as a local process (internal/localenv
//     [localenv.Replica]: the container's command and args as argv, its
//     environment, a free loopback port in $PORT, its probes with the
//     kubelet's semantics);
//   - writes the pod's status as the kubelet does: phase, a unique pod IP
//     in TEST-NET-1 (192.0.2.2-254; EndpointSlice validation rejects
//     loopback), startTime, the conditions PodScheduled, Initialized,
//     PodReadyToStartContainers, ContainersReady and Ready, and the
//     containerStatuses (ready, started, state, restartCount,
//     lastState.terminated with reason and exit code);
//   - records core/v1 Events like the kubelet's (Started, Unhealthy,
//     Killing, BackOff, Failed);
//   - follows the pod's restartPolicy: Always restarts the container with
//     CrashLoopBackOff; OnFailure and Never do not restart a container that
//     exited with code 0 (Never: with any code), and the pod's phase
//     becomes Succeeded or Failed, so a Job's controller counts it (the
//     completion index of an Indexed Job reaches the container through
//     its fieldRef to the pod's annotation, as the Job controller writes
//     it);
//   - serves the kubelet's containerLogs endpoint over HTTPS
//     ([Config.KubeletListen], reported as the Node's Hostname address and
//     status.daemonEndpoints.kubeletEndpoint), so the API server's
//     pods/log (kubectl logs -f, client-go GetLogs with Follow) reads a
//     pod's output;
//   - stops the process of a pod being deleted (preStop sleep, SIGTERM,
//     SIGKILL after the deletion's grace period) and then deletes the pod
//     with grace 0, as the kubelet confirms a deletion;
//   - runs a container's preStop sleep (lifecycle.preStop sleep, or an
//     exec hook that only sleeps) before SIGTERM when it ends a deleted
//     pod, within the pod's grace period, and emits the kubelet's Killing
//     Event;
//   - fronts each Service named in [Config.Services] with a local Service
//     proxy that routes, as kube-proxy does, to the ready endpoints of the
//     Service's EndpointSlices, mapping each pod IP back to that pod's
//     loopback listener; a pod being deleted stays routed as before for
//     [Config.EndpointLag] after its deletion began (kube-proxy's sync
//     lag), then leaves as a terminating endpoint. Traffic never goes to a
//     192.0.2.x address.
//
// It uses client-go informers, so it survives API server restarts: watches
// re-establish, and status writes that fail are retried until they land.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/netport"
)

// Defaults of [Config].
const (
	// DefaultHeartbeatPeriod is how often the Node's status is refreshed.
	DefaultHeartbeatPeriod = 10 * time.Second
	// DefaultShutdownTimeout bounds how long Run waits, after its context
	// ends, for the pods' processes to stop (each gets at most its grace
	// period, SIGKILL after).
	DefaultShutdownTimeout = 40 * time.Second
	// DefaultEndpointLag is [Config.EndpointLag]'s default, the local
	// runtime's (environment.local.endpointLag): 1 s.
	DefaultEndpointLag = time.Second
	// configRetry is how long the agent waits before trying again to start
	// a pod whose configuration could not be resolved (e.g. a Secret that
	// does not exist yet).
	configRetry = 5 * time.Second
)

// EventSource is the component name of the core/v1 Events the agent records.
const EventSource = "drill-agent"

// ServiceRoute asks for a local Service proxy for one Kubernetes Service.
type ServiceRoute struct {
	// Namespace and Name identify the Service; both required.
	Namespace, Name string
	// Listen is the proxy's host:port; "" means 127.0.0.1:0 (a free port).
	Listen string
}

// Config configures an [Agent].
type Config struct {
	// Client talks to the API server; required.
	Client kubernetes.Interface
	// Node is the Node's name; required.
	Node string
	// Namespace limits the pods the agent binds and runs to one namespace;
	// "" means every namespace.
	Namespace string
	// NodeIP is the Node's InternalIP and the pods' hostIP; default
	// [DefaultNodeIP]. It is reported, never dialled.
	NodeIP string
	// Services get a local Service proxy each.
	Services []ServiceRoute
	// Executable replaces argv[0] "drill" (or "/drill") of a container's
	// command: the running drill. "" leaves argv[0] as written.
	Executable string
	// APIServer is host:port of the API server as the agent reaches it;
	// when set, every container gets it in KUBERNETES_SERVICE_HOST and
	// KUBERNETES_SERVICE_PORT (before its own env, which may override
	// them), as the kubelet gives pods the kubernetes Service.
	APIServer string
	// KubeletListen is host:port of the kubelet API the agent serves
	// (HTTPS, a self-signed certificate); default [DefaultKubeletListen].
	// The host must be one the API server can dial: the Node reports it
	// as its Hostname address, the first address type kube-apiserver's
	// --kubelet-preferred-address-types tries by default.
	KubeletListen string
	// LogDir receives one log file per pod, <namespace>_<pod>.log
	// (stdout and stderr, appended across restarts). "" means a temporary
	// directory removed when Run returns.
	LogDir string
	// Runtime tunes the replicas (CrashLoopBackOff base and cap, log ring).
	Runtime localenv.Options
	// HeartbeatPeriod is how often the Node's status is refreshed; default
	// [DefaultHeartbeatPeriod].
	HeartbeatPeriod time.Duration
	// ShutdownTimeout bounds the stop of every pod at the end of Run;
	// default [DefaultShutdownTimeout].
	ShutdownTimeout time.Duration
	// EndpointLag is how long the Service proxies keep routing to a pod
	// being deleted, as before, while its preStop hook and SIGTERM start at
	// once: kube-proxy learns of a deletion only after the EndpointSlice
	// controller and its own sync (at most once a second in iptables mode
	// by default), so on a cluster a pod gets new requests for a while
	// after its SIGTERM. 0 means [DefaultEndpointLag]; negative: none (the
	// proxies follow the EndpointSlices as soon as they change).
	EndpointLag time.Duration
	// Log receives the agent's diagnostics; nil discards them.
	Log *slog.Logger
}

// Agent is a running node agent; see the package documentation.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	cs    kubernetes.Interface
	clock *event.Clock
	ips   *ipPool
	// ports hands each pod its loopback port, never the same twice
	// while the agent runs (internal/netport).
	ports  *netport.Picker
	routes []*route
	refs   refGetter
	// kubelet serves the kubelet API (containerLogs).
	kubelet *kubeletServer
	tmpDir  string

	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster

	podLister corelisters.PodLister
	// nodeLister reads this agent's Node (cordoned or not).
	nodeLister corelisters.NodeLister
	queue      workqueue.TypedRateLimitingInterface[string]

	// ctx is Run's context; pods' status writers and retries use it.
	ctx context.Context

	mu   sync.Mutex
	pods map[string]*podRun // by namespace/name
	byIP map[string]*podRun
	wg   sync.WaitGroup // terminations and status writers
}

// New validates cfg and opens the Service proxies' listeners (so that
// [Agent.ServiceURLs] is known before Run). Errors: a missing client or
// node name, a bad route, a listen address taken. Close the agent by
// running it and cancelling Run's context, or with [Agent.Close] if Run is
// never called.
func New(cfg Config) (*Agent, error) {
	if cfg.Client == nil {
		return nil, errors.New("node agent: no Kubernetes client")
	}
	if cfg.Node == "" {
		return nil, errors.New("node agent: node name is empty")
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = DefaultNodeIP
	}
	if cfg.HeartbeatPeriod <= 0 {
		cfg.HeartbeatPeriod = DefaultHeartbeatPeriod
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	switch {
	case cfg.EndpointLag == 0:
		cfg.EndpointLag = DefaultEndpointLag
	case cfg.EndpointLag < 0:
		cfg.EndpointLag = 0
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		cfg:   cfg,
		log:   log.With("node", cfg.Node),
		cs:    cfg.Client,
		clock: event.NewClock(),
		ips:   newIPPool(),
		ports: netport.NewPicker(),
		pods:  map[string]*podRun{},
		byIP:  map[string]*podRun{},
		refs: apiRefs{
			secret: func(ctx context.Context, ns, name string, o metav1.GetOptions) (*corev1.Secret, error) {
				return cfg.Client.CoreV1().Secrets(ns).Get(ctx, name, o)
			},
			configMap: func(ctx context.Context, ns, name string, o metav1.GetOptions) (*corev1.ConfigMap, error) {
				return cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, o)
			},
		},
	}
	ks, err := newKubeletServer(cfg.KubeletListen, a.kubeletHandler())
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	a.kubelet = ks
	seen := map[string]bool{}
	for i, r := range cfg.Services {
		if r.Namespace == "" || r.Name == "" {
			a.Close()
			return nil, fmt.Errorf("node agent: service %d: namespace and name are required", i)
		}
		if cfg.Namespace != "" && r.Namespace != cfg.Namespace {
			a.Close()
			return nil, fmt.Errorf("node agent: service %s/%s is outside the agent's namespace %s", r.Namespace, r.Name, cfg.Namespace)
		}
		if seen[r.Namespace+"/"+r.Name] {
			a.Close()
			return nil, fmt.Errorf("node agent: service %s/%s is listed twice", r.Namespace, r.Name)
		}
		seen[r.Namespace+"/"+r.Name] = true
		p, err := localenv.NewProxy(r.Name, r.Listen, localenv.PerRequest, a.clock, nil, EventSource, a.log)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("node agent: service %s/%s: %w", r.Namespace, r.Name, err)
		}
		a.routes = append(a.routes, &route{ns: r.Namespace, name: r.Name, proxy: p, slices: map[string][]endpointRef{}, set: map[string]string{}, lagging: map[string]time.Time{}})
	}
	return a, nil
}

// ServiceURLs maps "namespace/name" of each routed Service to its local
// proxy's URL (http://127.0.0.1:<port>).
func (a *Agent) ServiceURLs() map[string]string {
	out := make(map[string]string, len(a.routes))
	for _, r := range a.routes {
		out[r.ns+"/"+r.name] = r.proxy.URL()
	}
	return out
}

// KubeletURL is the base URL of the kubelet API the agent serves
// (https://host:port).
func (a *Agent) KubeletURL() string {
	return "https://" + net.JoinHostPort(a.kubelet.host, strconv.Itoa(a.kubelet.port))
}

// Close closes the Service proxies and the kubelet API of an agent whose
// Run was never called.
func (a *Agent) Close() {
	if a.kubelet != nil {
		a.kubelet.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range a.routes {
		_ = r.proxy.Close(ctx)
	}
}

// Run registers the Node, runs the pods bound to it and routes the
// Services until ctx ends; then it stops every pod's process (each within
// its grace period, all within [Config.ShutdownTimeout]; at once when hard
// ends, if not nil), marks the pods not ready and the Node NotReady (best
// effort), closes the proxies and returns. It returns an error when the
// Node cannot be registered or the informers cannot sync; an API server
// that goes away later is waited for.
func (a *Agent) Run(ctx context.Context, hard context.Context) (err error) {
	if hard == nil {
		hard = context.Background()
	}
	a.ctx = ctx
	defer a.Close()
	if a.cfg.LogDir == "" {
		d, err := os.MkdirTemp("", "drill-agent-"+a.cfg.Node+"-")
		if err != nil {
			return fmt.Errorf("create pod log directory: %w", err)
		}
		a.tmpDir, a.cfg.LogDir = d, d
		defer os.RemoveAll(d)
	} else if err := os.MkdirAll(a.cfg.LogDir, 0o755); err != nil {
		return fmt.Errorf("create pod log directory: %w", err)
	}

	a.kubelet.serve()
	if err := a.registerNode(ctx); err != nil {
		return err
	}

	a.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
	a.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.cs.CoreV1().Events("")})
	a.recorder = a.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventSource, Host: a.cfg.Node})
	defer a.broadcaster.Shutdown()

	a.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "drill-agent-pods"})

	infCtx, stopInformers := context.WithCancel(context.Background())
	var factories []informers.SharedInformerFactory
	defer func() {
		stopInformers()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	opts := []informers.SharedInformerOption{}
	if a.cfg.Namespace != "" {
		opts = append(opts, informers.WithNamespace(a.cfg.Namespace))
	}
	podFactory := informers.NewSharedInformerFactoryWithOptions(a.cs, 0, opts...)
	factories = append(factories, podFactory)
	podInf := podFactory.Core().V1().Pods()
	a.podLister = podInf.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			a.queue.Add(key)
		}
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	synced := []cache.InformerSynced{podInf.Informer().HasSynced}
	// The agent's own Node: a cordoned node (spec.unschedulable) gets no
	// new pod, as the scheduler binds none there; when it is uncordoned,
	// the pods left pending are bound.
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(a.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + a.cfg.Node
	}))
	factories = append(factories, nodeFactory)
	nodeInf := nodeFactory.Core().V1().Nodes()
	a.nodeLister = nodeInf.Lister()
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && o.Spec.Unschedulable && !n.Spec.Unschedulable {
				a.enqueuePending()
			}
		},
	}); err != nil {
		return fmt.Errorf("watch node: %w", err)
	}
	synced = append(synced, nodeInf.Informer().HasSynced)
	if len(a.routes) > 0 {
		sf := informers.NewSharedInformerFactoryWithOptions(a.cs, 0, opts...)
		factories = append(factories, sf)
		si := sf.Discovery().V1().EndpointSlices().Informer()
		if _, err := si.AddEventHandler(a.sliceHandler()); err != nil {
			return fmt.Errorf("watch EndpointSlices: %w", err)
		}
		synced = append(synced, si.HasSynced)
	}
	for _, f := range factories {
		f.Start(infCtx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		a.queue.ShutDown()
		return fmt.Errorf("sync pod and EndpointSlice informers: %w", context.Cause(ctx))
	}
	a.log.Info("node agent ready", "namespace", nsOrAll(a.cfg.Namespace), "services", len(a.routes), "logDir", a.cfg.LogDir)

	workersDone := make(chan struct{})
	go func() {
		defer close(workersDone)
		for a.processNext() {
		}
	}()
	heartbeatDone := make(chan struct{})
	go func() {
		defer close(heartbeatDone)
		a.heartbeat(ctx)
	}()

	<-ctx.Done()
	a.queue.ShutDown()
	<-workersDone
	<-heartbeatDone
	a.shutdown(hard)
	return nil
}

func nsOrAll(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}

// processNext handles one queued pod key; false once the queue shut down.
func (a *Agent) processNext() bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	if err := a.syncPod(key); err != nil {
		a.log.Warn("sync pod", "pod", key, "err", err)
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// syncPod brings the pod named key to what the API says: bind it, start
// it, stop it, or nothing.
func (a *Agent) syncPod(key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := a.podLister.Pods(ns).Get(name)
	a.mu.Lock()
	run := a.pods[key]
	a.mu.Unlock()
	if err != nil { // gone from the API (deleted, or force-deleted)
		if run != nil {
			a.terminate(run, 0, false, "pod deleted")
		}
		return nil
	}
	if run != nil && run.uid != pod.UID {
		a.terminate(run, 0, false, "pod replaced by one of the same name")
		run = nil
	}
	switch {
	case pod.Spec.NodeName == "":
		if pod.DeletionTimestamp != nil || (pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName) {
			return nil
		}
		if !a.selects(pod) {
			// Meant for another node (a real kubelet's on the same
			// control plane): the scheduler's to place.
			return nil
		}
		return a.bind(pod)
	case pod.Spec.NodeName != a.cfg.Node:
		return nil
	case pod.DeletionTimestamp != nil:
		grace := time.Duration(0)
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		if run == nil {
			run = a.adopt(pod) // nothing runs: confirm the deletion
		}
		a.terminate(run, grace, true, "pod deleted")
		return nil
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil
	case run == nil:
		run = a.adopt(pod)
		a.start(run, pod)
	case run.replica() == nil && !run.unsupported && time.Since(run.lastTry) >= configRetry:
		a.start(run, pod)
	}
	return nil
}

// enqueuePending queues every pod not yet bound (a node just uncordoned).
func (a *Agent) enqueuePending() {
	pods, err := a.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			if key, err := cache.MetaNamespaceKeyFunc(p); err == nil {
				a.queue.Add(key)
			}
		}
	}
}

// cordoned reports whether this agent's Node is unschedulable and pod
// does not tolerate it (the taint node.kubernetes.io/unschedulable, as a
// DaemonSet's pods do).
func (a *Agent) cordoned(pod *corev1.Pod) bool {
	if a.nodeLister == nil {
		return false
	}
	n, err := a.nodeLister.Get(a.cfg.Node)
	if err != nil || !n.Spec.Unschedulable {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		keyOK := t.Key == corev1.TaintNodeUnschedulable || t.Key == "" && t.Operator == corev1.TolerationOpExists
		if keyOK && (t.Effect == "" || t.Effect == corev1.TaintEffectNoSchedule) {
			return false
		}
	}
	return true
}

// selects reports whether this node's labels ([nodeLabels]) satisfy
// pod's spec.nodeSelector, as the scheduler's NodeSelector filter asks; a
// pod whose selector names another node is not bound here.
func (a *Agent) selects(pod *corev1.Pod) bool {
	own := a.nodeLabels()
	for k, v := range pod.Spec.NodeSelector {
		if own[k] != v {
			return false
		}
	}
	return true
}

// bind binds pod to this node, as the scheduler would; a pod is left
// pending while the node is cordoned (see [Agent.cordoned]).
func (a *Agent) bind(pod *corev1.Pod) error {
	if a.cordoned(pod) {
		a.log.Debug("pod left pending: node cordoned", "pod", pod.Namespace+"/"+pod.Name)
		return nil
	}
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: a.cfg.Node},
	}
	if err := a.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bind pod %s/%s to node %s: %w", pod.Namespace, pod.Name, a.cfg.Node, err)
	}
	a.log.Info("pod bound", "pod", pod.Namespace+"/"+pod.Name)
	return nil
}

// shutdown stops every pod (graceful, bounded by ShutdownTimeout, at once
// when hard ends) and reports them and the Node not ready.
func (a *Agent) shutdown(hard context.Context) {
	a.mu.Lock()
	runs := make([]*podRun, 0, len(a.pods))
	for _, r := range a.pods {
		runs = append(runs, r)
	}
	a.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].key < runs[j].key })
	ctx, cancel := context.WithTimeout(hard, a.cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r.stopProcess(ctx, a.log) })
	}
	wg.Wait()
	a.wg.Wait()
	// Best effort: tell the API the pods and the node are down.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	for _, r := range runs {
		r.markStopped()
		if err := a.writeStatus(sctx, r); err != nil {
			a.log.Debug("final pod status", "pod", r.key, "err", err)
		}
		r.closeLog()
	}
	if err := a.updateNodeStatus(sctx, false); err != nil {
		a.log.Debug("final node status", "err", err)
	}
	a.log.Info("node agent stopped", "pods", len(runs))
}
