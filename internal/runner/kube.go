package runner

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/kube"
	"github.com/drillhq/drill/internal/nodeagent"
	"github.com/drillhq/drill/internal/observe"
	"github.com/drillhq/drill/internal/record"
	"github.com/drillhq/drill/internal/scenario"
)

// kubeEnv is the cluster side of a kubernetes run.
type kubeEnv struct {
	cfg       *kube.Config
	clientset kubernetes.Interface
	// nodes ran the target services' pods at preflight (run.json's
	// environment.nodes).
	nodes []record.Node
}

// preflight checks, before anything is touched, that a kubernetes run may
// use the resolved kubeconfig context and every namespace it names (exit 2
// otherwise), and connects the client. Local runs need nothing here.
func (r *run) preflight() error {
	if r.sc.Environment.Type != scenario.EnvKubernetes {
		return nil
	}
	kenv := r.sc.Environment.Kubernetes
	ns := r.opts.Namespace
	if ns == "" && kenv != nil {
		ns = kenv.Namespace
	}
	cfg, err := kube.Load(r.opts.Kubeconfig, r.opts.Context, ns)
	if err != nil {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("kubeconfig: %w", err))
	}
	for _, n := range r.namespaces(cfg.Namespace) {
		if err := kube.CheckAllowed(kenv, cfg.Context, n); err != nil {
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w", r.sc.File, err))
		}
	}
	cs, err := cfg.Clientset()
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("connect to context %s: %w", cfg.Context, err))
	}
	r.kube = &kubeEnv{cfg: cfg, clientset: cs}
	r.log.Info("kubernetes context allowed", "context", cfg.Context, "namespace", cfg.Namespace)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r.kube.nodes = targetNodes(ctx, cs, cfg.Namespace, r.sc.Services)
	for _, n := range r.kube.nodes {
		r.log.Info("node of the system under test", "node", n.Line())
	}
	return nil
}

// targetNodes reads the Nodes that run the pods of the services with a
// selector in ns: which kubelet and runtime (status.nodeInfo), or drill's
// node agent (its kubeletVersion [nodeagent.KubeletVersion]). A pod list
// that fails gives no nodes; a Node that cannot be read (a team's role may
// not get Nodes) is listed with its error. Never fails the run.
func targetNodes(ctx context.Context, cs kubernetes.Interface, ns string, services []scenario.Service) []record.Node {
	pods := map[string]int{}
	for _, s := range services {
		if s.Selector == "" {
			continue
		}
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.Selector})
		if err != nil {
			continue
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				pods[p.Spec.NodeName]++
			}
		}
	}
	out := make([]record.Node, 0, len(pods))
	for name, n := range pods {
		rn := record.Node{Name: name, Pods: n}
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			rn.Error = err.Error()
			out = append(out, rn)
			continue
		}
		info := node.Status.NodeInfo
		rn.Kind = record.NodeKubelet
		if info.KubeletVersion == nodeagent.KubeletVersion {
			rn.Kind = record.NodeAgent
		}
		rn.KubeletVersion, rn.ContainerRuntime = info.KubeletVersion, info.ContainerRuntimeVersion
		rn.OSImage, rn.KernelVersion = info.OSImage, info.KernelVersion
		out = append(out, rn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// namespaces lists every namespace the run would touch: the run's own and
// each observer's.
func (r *run) namespaces(def string) []string {
	seen := map[string]bool{def: true}
	out := []string{def}
	add := func(ns string) {
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	for _, o := range r.sc.Observers.Pods {
		add(o.Namespace)
	}
	for _, o := range r.sc.Observers.EndpointSlices {
		add(o.Namespace)
	}
	return out
}

// observeDeps gives the observers the cluster client (kubernetes runs) and
// the ${...} expansion. Services with a selector are watched as targets:
// their pods by selector and the Kubernetes Service of the same name.
func (r *run) observeDeps() observe.Deps {
	d := observe.Deps{
		Expand: func(s string) (string, error) { return scenario.Expand(s, r.vars) },
	}
	if r.kube == nil {
		return d
	}
	d.Kube = r.kube.clientset
	d.Namespace = r.kube.cfg.Namespace
	for _, s := range r.sc.Services {
		if s.Selector == "" {
			continue
		}
		d.KubeTargets = append(d.KubeTargets, observe.KubeTarget{
			Service:              s.Name,
			Namespace:            r.kube.cfg.Namespace,
			Selector:             s.Selector,
			EndpointSliceService: s.Name,
		})
	}
	return d
}
