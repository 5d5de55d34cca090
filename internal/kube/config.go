// Package kube loads a Kubernetes client configuration the way kubectl does
// (--kubeconfig, KUBECONFIG, --context, -n/--namespace) and holds a
// kubernetes run to the scenario's allow-list of contexts and namespaces
// (docs/DESIGN.md §5: a chaos tool must not hit production by
// accident).
package kube

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side rate limits applied to the loaded config. client-go's
// defaults (5 req/s, burst 10) throttle informers that list and watch
// several resources at once.
const (
	// DefaultQPS is the client's sustained request rate, in req/s.
	DefaultQPS = 50
	// DefaultBurst is the client's burst, in requests.
	DefaultBurst = 100
)

// Config is a loaded client configuration with the context and namespace it
// resolved to.
type Config struct {
	// Rest is the client configuration (QPS DefaultQPS, Burst DefaultBurst).
	Rest *rest.Config
	// Context is the kubeconfig context in use: --context if given, else the
	// kubeconfig's current-context. Never empty.
	Context string
	// Namespace is the namespace in use: the namespace argument if given,
	// else the context's namespace, else "default". Never empty.
	Namespace string
	// Files are the kubeconfig files that were read, in precedence order.
	Files []string
}

// Load reads the client configuration with kubectl's conventions:
//
//   - kubeconfig (the --kubeconfig flag) names one file and wins; a missing
//     file is an error;
//   - otherwise $KUBECONFIG, a list of paths separated by the OS path list
//     separator (':' on Linux), merged first-wins, missing entries ignored;
//   - otherwise ~/.kube/config;
//   - context (--context) overrides current-context; it must exist;
//   - namespace (-n/--namespace; the runner passes the scenario's namespace
//     when the flag is unset) overrides the context's namespace, which
//     defaults to "default".
//
// In-cluster configuration is never used: the allow-list is checked against
// a named context. Errors name the files read and, for an unknown context,
// the contexts available.
func Load(kubeconfig, context, namespace string) (*Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	overrides.Context.Namespace = namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)

	files := rules.GetLoadingPrecedence()
	if kubeconfig != "" {
		files = []string{kubeconfig}
	}
	where := strings.Join(files, ", ")
	if where == "" {
		where = "no kubeconfig file"
	}

	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig (%s): %w", where, err)
	}
	name := context
	if name == "" {
		name = raw.CurrentContext
	}
	if name == "" {
		return nil, fmt.Errorf("load kubeconfig (%s): no current-context set and no --context given; contexts: %s",
			where, listOrNone(contextNames(raw.Contexts)))
	}
	kctx, ok := raw.Contexts[name]
	if !ok || kctx == nil {
		return nil, fmt.Errorf("load kubeconfig (%s): context %q not found; contexts: %s",
			where, name, listOrNone(contextNames(raw.Contexts)))
	}

	// ClientConfig of the deferred loader would fall back to in-cluster
	// config on an empty kubeconfig; build from the merged raw config instead.
	rc, err := clientcmd.NewNonInteractiveClientConfig(raw, name, overrides, rules).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("build client config for context %q (%s): %w", name, where, err)
	}
	rc.QPS, rc.Burst = DefaultQPS, DefaultBurst
	if rc.UserAgent == "" {
		rc.UserAgent = "drill"
	}

	ns := namespace
	if ns == "" {
		ns = kctx.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	return &Config{Rest: rc, Context: name, Namespace: ns, Files: files}, nil
}

// Clientset builds a typed clientset from c.Rest.
func (c *Config) Clientset() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.Rest)
	if err != nil {
		return nil, fmt.Errorf("create clientset for context %q: %w", c.Context, err)
	}
	return cs, nil
}

func contextNames[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// ErrNotAllowed marks a context or namespace refused by the scenario's
// allow-list. The runner maps it to exit 2 (bad input) before anything is
// touched; test with errors.Is.
var ErrNotAllowed = errors.New("not in the scenario's allow-list")
