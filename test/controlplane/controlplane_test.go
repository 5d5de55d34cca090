package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// tWriter sends slog output to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// podIP is the address reported for the test pod: TEST-NET-1, because
// EndpointSlice validation rejects loopback addresses. No traffic is ever
// sent to it.
const podIP = "192.0.2.10"

// TestEndpointSliceController starts the real control plane and checks that
// the real EndpointSlice controller follows a pod's Ready condition, printing
// how long it took to mark the endpoint ready=false after the pod's status
// was written. Only a generous bound (15 s) is asserted. It then stops the
// control plane and checks that no process of it remains.
func TestEndpointSliceController(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver and kube-controller-manager")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()

	start := time.Now()
	cp, err := Start(ctx, Options{Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := cp.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		}
	})
	t.Logf("control plane ready %.1f s after Start (build check included)", time.Since(start).Seconds())
	dir := cp.Dir()
	apiPID, kcmPID := cp.PIDs()

	// Use the written kubeconfig, as drill and kubectl would.
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cp.Kubeconfig()},
		&clientcmd.ConfigOverrides{CurrentContext: ContextName}).ClientConfig()
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("create clientset: %v", err)
	}

	const ns, svcName, nodeName = "eps-test", "web", "drill-node-1"
	mustNoErr(t, "create namespace", func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	// The ServiceAccount admission plugin refuses pods until the
	// namespace's default ServiceAccount exists.
	mustNoErr(t, "wait for default ServiceAccount", func() error {
		return poll(ctx, 2*time.Minute, func() (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	})
	mustNoErr(t, "create node", func() error { return createReadyNode(ctx, cs, nodeName) })
	mustNoErr(t, "create service", func() error {
		_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svcName},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	no := false
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:                     nodeName,
			AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{
				Name: "web", Image: "drill.test/web:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	// Flip Ready a few times; each flip is measured from just before the
	// status write to the arrival of the first EndpointSlice watch event
	// showing the new readiness, on one watch opened beforehand (as an
	// observer would keep it). Flips are 1 s apart: a write made within a
	// few ms of the controller's previous slice update was reflected about
	// 200 ms late here, which is not what a drill's pods do.
	w := watchSlices(ctx, t, cs, ns, svcName)
	var toFalse []time.Duration
	for cycle := range 3 {
		for _, ready := range []bool{true, false} {
			time.Sleep(time.Second)
			d, err := setReadyAndWait(ctx, cs, w, ns, pod.Name, ready)
			if err != nil {
				t.Fatalf("cycle %d ready=%v: %v", cycle, ready, err)
			}
			t.Logf("cycle %d: EndpointSlice showed ready=%v %d ms after the pod status write", cycle, ready, d.Milliseconds())
			if !ready {
				toFalse = append(toFalse, d)
			}
		}
	}
	for i, d := range toFalse {
		if d > 15*time.Second {
			t.Errorf("flip %d: endpoint marked ready=false after %s, want < 15 s", i, d)
		}
	}
	fmt.Printf("EndpointSlice controller ready=false latency (ms): %v\n", millis(toFalse))

	// An API server crash and restart keeps the data (etcd lives on) and
	// the controller manager reconnects: the next flip is still followed.
	restart := time.Now()
	if err := cp.RestartAPIServer(ctx, 0); err != nil {
		t.Fatalf("RestartAPIServer: %v", err)
	}
	t.Logf("kube-apiserver restarted and ready in %.1f s", time.Since(restart).Seconds())
	if newAPI, _ := cp.PIDs(); newAPI == apiPID {
		t.Errorf("kube-apiserver pid unchanged (%d) after restart", apiPID)
	} else if err := syscall.Kill(apiPID, 0); err == nil {
		t.Errorf("old kube-apiserver %d still alive after restart", apiPID)
	} else {
		apiPID = newAPI
	}
	w.Stop() // broken by the restart; open a new one
	w = watchSlices(ctx, t, cs, ns, svcName)
	for _, ready := range []bool{true, false} {
		time.Sleep(time.Second)
		d, err := setReadyAndWait(ctx, cs, w, ns, pod.Name, ready)
		if err != nil {
			t.Fatalf("after restart, ready=%v: %v", ready, err)
		}
		t.Logf("after restart: EndpointSlice showed ready=%v %d ms after the pod status write", ready, d.Milliseconds())
	}

	w.Stop() // an open watch holds up the API server's graceful shutdown
	stopAt := time.Now()
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	t.Logf("Stop took %.1f s", time.Since(stopAt).Seconds())
	for _, pid := range []int{apiPID, kcmPID} {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still alive after Stop", pid)
		}
	}
	// Every component's command line names the temp dir, unique to this
	// control plane; other control planes on the machine are not counted.
	out, err := exec.Command("pgrep", "-a", "-f", dir).CombinedOutput()
	if err == nil {
		t.Errorf("processes of this control plane remain after Stop:\n%s", out)
	}
	if _, err := exec.Command("test", "-e", dir).CombinedOutput(); err == nil {
		t.Errorf("temp dir %s remains after Stop", dir)
	}
}

// createReadyNode registers a Node and sets its Ready condition to True, as
// a kubelet's first status update would.
func createReadyNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// watchSlices opens a watch on the EndpointSlices of Service svc.
func watchSlices(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, svc string) watch.Interface {
	t.Helper()
	w, err := cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatalf("watch endpointslices: %v", err)
	}
	return w
}

// setReadyAndWait writes the pod's status as a kubelet would (phase Running,
// podIP, Ready and ContainersReady set to ready) and reads w until an
// EndpointSlice shows the pod's endpoint with that readiness, for at most
// 1 min. It returns the time from just before the status write to the
// reading of that watch event.
func setReadyAndWait(ctx context.Context, cs kubernetes.Interface, w watch.Interface, ns, podName string, ready bool) (time.Duration, error) {
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get pod: %w", err)
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = podIP
	pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
	pod.Status.HostIP = "192.0.2.1"
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &now
	}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "web", Image: "drill.test/web:1", ImageID: "drill.test/web@sha256:0", ContainerID: "drill://web-0",
		Ready: ready, Started: &[]bool{true}[0],
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *pod.Status.StartTime}},
	}}
	written := time.Now()
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return 0, fmt.Errorf("update pod status: %w", err)
	}
	timeout := time.After(time.Minute)
	for {
		var ev watch.Event
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return 0, fmt.Errorf("endpointslice watch closed before %s showed ready=%v", podIP, ready)
			}
			ev = e
		case <-timeout:
			return 0, fmt.Errorf("endpointslice never showed %s ready=%v within 1 min", podIP, ready)
		}
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			continue
		}
		eps, ok := ev.Object.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range eps.Endpoints {
			// nil Ready means ready (API doc of EndpointConditions).
			epReady := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if len(ep.Addresses) > 0 && ep.Addresses[0] == podIP && epReady == ready {
				return time.Since(written), nil
			}
		}
	}
}

// poll calls f every 200 ms until it reports done, returns an error, or
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func mustNoErr(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func millis(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}

// TestStartFailureCleansUp checks that a kube-apiserver that cannot start
// makes Start fail with its log in the error and leave no process and no temp
// dir behind. It uses binaries built by an earlier run and skips without them.
func TestStartFailureCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	binDir, err := defaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(binDir, binAPIServer)); err != nil {
		t.Skipf("no prebuilt binaries in %s (run TestEndpointSliceController first)", binDir)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "drill-controlplane-*"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := Start(ctx, Options{SkipBuild: true, ExtraAPIServerArgs: []string{"--no-such-flag=1"}})
	if err == nil {
		cp.Stop()
		t.Fatal("Start succeeded with an unknown kube-apiserver flag")
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("error does not quote the API server's complaint: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "drill-controlplane-*"))
	seen := map[string]bool{}
	for _, d := range before {
		seen[d] = true
	}
	for _, d := range after {
		if !seen[d] {
			t.Errorf("temp dir %s left behind", d)
		}
	}
}
