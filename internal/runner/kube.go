package runner

import (
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/kube"
	"github.com/drillhq/drill/internal/observe"
	"github.com/drillhq/drill/internal/scenario"
)

// kubeEnv is the cluster side of a kubernetes run.
type kubeEnv struct {
	cfg       *kube.Config
	clientset kubernetes.Interface
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
	return nil
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
