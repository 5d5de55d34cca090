package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/observe"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/testutil/testproc"
)

// apply creates the Deployment, Service and PodDisruptionBudget of
// scenarios/k8s/manifests/file in the test namespace with client-go, for
// drill agent's node, and deletes them when the test ends, waiting until
// the agent has stopped and deleted every pod.
func (e *clusterEnv) apply(t *testing.T, file string) {
	t.Helper()
	e.applyTo(t, file, false)
}

// applyKubelet is apply for the real node: the Deployment's pods get
// onKubelet's changes, and the kubelet stops and deletes them at the end.
func (e *clusterEnv) applyKubelet(t *testing.T, file string) {
	t.Helper()
	e.applyTo(t, file, true)
}

// onKubelet changes a manifest's pod template for the real node: a
// nodeSelector naming kubeletNode and a toleration of kubeletTaint (the
// scheduler places it there, the agent leaves it alone), and
// "--listen 0.0.0.0:<its first containerPort>" after the container's
// args: `drill serve` listens on 127.0.0.1:$PORT by default, the address
// the agent's processes use, where a pod's own IP, which the kubelet
// probes and kube-proxy routes to, would find nothing. Probes, ports,
// image and command stay as written.
func onKubelet(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := &d.Spec.Template.Spec
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector["kubernetes.io/hostname"] = kubeletNode
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: kubeletTaint.Key, Operator: corev1.TolerationOpEqual, Value: kubeletTaint.Value, Effect: kubeletTaint.Effect})
	if len(spec.Containers) != 1 || len(spec.Containers[0].Ports) == 0 {
		t.Fatalf("Deployment %s: want one container with a port", d.Name)
	}
	c := &spec.Containers[0]
	c.Args = append(c.Args, "--listen", fmt.Sprintf("0.0.0.0:%d", c.Ports[0].ContainerPort))
}

func (e *clusterEnv) applyTo(t *testing.T, file string, kubelet bool) {
	t.Helper()
	path := filepath.Join(e.root, "scenarios", "k8s", "manifests", file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var selector string
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			if kubelet {
				onKubelet(t, o)
			}
			if _, err := e.cs.AppsV1().Deployments(namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create Deployment %s: %v", o.Name, err)
			}
			selector = metav1.FormatLabelSelector(o.Spec.Selector)
			name := o.Name
			t.Cleanup(func() { e.deleteDeployment(t, name, selector) })
		case *corev1.Service:
			if _, err := e.cs.CoreV1().Services(namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create Service %s: %v", o.Name, err)
			}
			name := o.Name
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := e.cs.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete Service %s: %v", name, err)
				}
			})
		case *policyv1.PodDisruptionBudget:
			if _, err := e.cs.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create PodDisruptionBudget %s: %v", o.Name, err)
			}
			name := o.Name
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := e.cs.PolicyV1().PodDisruptionBudgets(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete PodDisruptionBudget %s: %v", name, err)
				}
			})
		default:
			t.Fatalf("%s: unexpected object %T", path, obj)
		}
	}
}

// deleteDeployment deletes a Deployment (its ReplicaSets and pods follow
// through the garbage collector) and waits until no pod of selector is left:
// the agent stops each process and confirms the deletion.
func (e *clusterEnv) deleteDeployment(t *testing.T, name, selector string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	if err := e.cs.AppsV1().Deployments(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Deployment %s: %v", name, err)
		return
	}
	for {
		pods, err := e.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if ctx.Err() != nil {
			n := -1
			if pods != nil {
				n = len(pods.Items)
			}
			t.Errorf("pods of %s still there 2 minutes after deleting the Deployment (%d, err %v); agent log (if they ran there):\n%s", name, n, err, e.agent.tail(20))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// scenario writes scenarios/k8s/<file> into the test's temp dir with the
// addresses of this environment (toxiproxy.url, the proxy's listen and
// upstream, each service's url: the agent's Service proxy) and edit
// applied, and returns its path.
func (e *clusterEnv) scenario(t *testing.T, file string, edit func(root *yaml.Node)) string {
	t.Helper()
	return e.scenarioVia(t, file, false, edit)
}

// kubeletScenario is scenario for the real node: each service's url is
// the Kubernetes Service's ClusterIP and port, which kube-proxy routes.
func (e *clusterEnv) kubeletScenario(t *testing.T, file string, edit func(root *yaml.Node)) string {
	t.Helper()
	return e.scenarioVia(t, file, true, edit)
}

func (e *clusterEnv) scenarioVia(t *testing.T, file string, clusterIP bool, edit func(root *yaml.Node)) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.root, "scenarios", "k8s", file))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	setYAML(t, root, "toxiproxy.url", e.tpURL)
	setYAML(t, root, "proxies.0.listen", e.proxyListen)
	setYAML(t, root, "proxies.0.upstream", e.pg.Addr)
	svc := getYAML(t, root, "services.0.name").Value
	addr, ok := e.serviceAddr[svc]
	if clusterIP {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := e.cs.CoreV1().Services(namespace).Get(ctx, svc, metav1.GetOptions{})
		if err != nil || s.Spec.ClusterIP == "" || len(s.Spec.Ports) == 0 {
			t.Fatalf("%s: Service %s has no ClusterIP and port (%v)", file, svc, err)
		}
		addr, ok = net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(s.Spec.Ports[0].Port))), true
		waitRouted(t, addr, time.Minute)
	}
	if !ok {
		t.Fatalf("%s: the agent routes no Service %q", file, svc)
	}
	setYAML(t, root, "services.0.url", "http://"+addr)
	if edit != nil {
		edit(root)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitRouted waits until a TCP connection to a Service's ClusterIP
// address is accepted: kube-proxy has written the Service's rules with
// its ready endpoints. Until then the address refuses connections
// (kube-proxy's reject rule for a Service without endpoints), even after
// the EndpointSlice lists them ready: a run started then fails its
// fault-path check (measured: the naive pods Ready 1.8 s after their
// Deployment, the ClusterIP still refusing at once).
func waitRouted(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			t.Logf("Service %s accepts connections (kube-proxy) %.2f s after the wait began", addr, time.Since(start).Seconds())
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("Service %s still refuses connections after %s: %v", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getYAML finds the node at a dotted path (mapping keys and sequence
// indexes) under root.
func getYAML(t *testing.T, root *yaml.Node, path string) *yaml.Node {
	t.Helper()
	n := root
	for _, part := range strings.Split(path, ".") {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					next = n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			var idx int
			if _, err := fmt.Sscanf(part, "%d", &idx); err == nil && idx < len(n.Content) {
				next = n.Content[idx]
			}
		}
		if next == nil {
			t.Fatalf("scenario has no %s", path)
		}
		n = next
	}
	return n
}

func setYAML(t *testing.T, root *yaml.Node, path, value string) {
	t.Helper()
	n := getYAML(t, root, path)
	n.Value, n.Tag, n.Style = value, "!!str", 0
}

// drillRun is a finished `drill run`.
type drillRun struct {
	code           int
	out            string // the report directory (--out)
	stdout, stderr string // file paths
}

// startDrill starts `drill run -v` with args before the scenario; wait
// with drillRun.wait.
func (e *clusterEnv) startDrill(t *testing.T, args ...string) (*proc, *drillRun) {
	t.Helper()
	dir := t.TempDir()
	res := &drillRun{out: filepath.Join(dir, "reports")}
	argv := append([]string{e.drill, "run", "-v", "--out", res.out, "--state-dir", filepath.Join(dir, "state")}, args...)
	t.Logf("running %s", strings.Join(argv[1:], " "))
	p, err := startProc("drill-run", dir, os.Environ(), argv...)
	if err != nil {
		t.Fatal(err)
	}
	res.stdout, res.stderr = p.stdout, p.stderr
	t.Cleanup(func() { _ = p.stop(syscall.SIGINT, time.Minute) })
	return p, res
}

// wait waits for p (at most timeout) and records its exit code.
func (r *drillRun) wait(t *testing.T, p *proc, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.stop(syscall.SIGINT, time.Minute)
		t.Fatalf("drill run did not end within %s:\n%s", timeout, p.tail(30))
	}
	r.code = p.cmd.ProcessState.ExitCode()
}

// runDrill runs `drill run -v` to its end.
func (e *clusterEnv) runDrill(t *testing.T, args ...string) *drillRun {
	t.Helper()
	p, r := e.startDrill(t, args...)
	r.wait(t, p, 5*time.Minute)
	return r
}

func (r *drillRun) summary() string {
	b, _ := os.ReadFile(r.stdout)
	return string(b)
}

func (r *drillRun) stderrTail(n int) string {
	b, _ := os.ReadFile(r.stderr)
	return testproc.Tail(b, n)
}

// record reads run.json.
func (r *drillRun) record(t *testing.T) *record.Run {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.out, "run.json"))
	if err != nil {
		t.Fatalf("read run.json: %v\nstdout:\n%s\nstderr:\n%s", err, r.summary(), r.stderrTail(30))
	}
	var run record.Run
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatalf("decode run.json: %v", err)
	}
	return &run
}

// result finds the assertion result named name.
func result(t *testing.T, run *record.Run, name string) (verdict, message string, figure float64) {
	t.Helper()
	for _, r := range run.Results {
		if r.Name == name {
			return string(r.Verdict), r.Message, r.Figure.Value
		}
	}
	t.Fatalf("run.json has no result %q", name)
	return "", "", 0
}

// window is the span drill's Kubernetes observer ran, in wall-clock time:
// from its first event (the informers' initial list) to load-end.
type window struct{ from, to time.Time }

func (w window) contains(t time.Time) bool { return !t.Before(w.from) && !t.After(w.to) }

// drillObservations turns the run's Kubernetes observer events into the
// independent watch's terms, and returns the window drill observed. Events
// of the informers' initial list are state, not changes, and are left out.
func drillObservations(t *testing.T, run *record.Run) ([]observation, window) {
	t.Helper()
	var out []observation
	var w window
	for _, e := range run.Events {
		at := run.StartedAt.Add(e.At)
		if e.Kind == event.PhaseStart && e.Detail == "load-end" {
			w.to = at
		}
		if e.Source != observe.SourceKube {
			continue
		}
		if w.from.IsZero() {
			w.from = at
		}
		switch e.Kind {
		case event.PodReady, event.PodUnready, event.ContainerRestart, event.PodCreated, event.PodDeleted,
			event.EndpointReady, event.EndpointNotReady, event.EndpointRemoved:
		default:
			continue
		}
		if e.Detail == observe.DetailInitial || strings.HasSuffix(e.Detail, "("+observe.DetailInitial+")") {
			continue
		}
		out = append(out, observation{at: at, kind: string(e.Kind), pod: e.Pod, restart: e.RestartCount})
	}
	if w.from.IsZero() || w.to.IsZero() {
		t.Fatalf("run.json: no Kubernetes observer events or no load-end (from %v, to %v)", w.from, w.to)
	}
	return out, w
}

// within keeps the observations inside w.
func within(obs []observation, w window) []observation {
	var out []observation
	for _, o := range obs {
		if w.contains(o.at) {
			out = append(out, o)
		}
	}
	return out
}

// sequences groups kinds per pod, pod-level and endpoint-level apart (the
// two come from different watches whose relative order may differ).
func sequences(obs []observation) (pods, endpoints map[string][]string) {
	pods, endpoints = map[string][]string{}, map[string][]string{}
	for _, o := range obs {
		k := o.kind
		if o.kind == kRestart {
			k = fmt.Sprintf("%s#%d", o.kind, o.restart)
		}
		switch o.kind {
		case kEPReady, kEPNotReady, kEPRemoved:
			endpoints[o.pod] = append(endpoints[o.pod], k)
		default:
			pods[o.pod] = append(pods[o.pod], k)
		}
	}
	return pods, endpoints
}

func countKind(obs []observation, kind string) int {
	n := 0
	for _, o := range obs {
		if o.kind == kind {
			n++
		}
	}
	return n
}

// kubectl runs /usr/bin/kubectl (or kubectl on PATH) against the test
// cluster; it skips t if there is none.
func (e *clusterEnv) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := "/usr/bin/kubectl"
	if !testproc.FileExists(bin) {
		p, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("kubectl is not installed (Debian package kubectl): cannot show the restarts as kubectl does")
		}
		bin = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", e.kubeconfig, "--context", contextName}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
