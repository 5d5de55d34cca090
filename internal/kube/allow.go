package kube

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drillhq/drill/internal/scenario"
)

// AllowedNamespaces is the namespace allow-list of env: AllowedNamespaces
// when set, else only env.Namespace (none when both are empty). Sorted, no
// duplicates.
func AllowedNamespaces(env *scenario.KubernetesEnv) []string {
	if env == nil {
		return nil
	}
	var out []string
	if len(env.AllowedNamespaces) > 0 {
		out = slices.Clone(env.AllowedNamespaces)
	} else if env.Namespace != "" {
		out = []string{env.Namespace}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckAllowed refuses a kubeconfig context or namespace that the
// scenario's environment.kubernetes allow-list does not name. The error
// wraps [ErrNotAllowed] and lists what is allowed; a nil env (no
// allow-list) refuses everything. Call it for every namespace the run will
// touch (observers may name their own) before any client call.
func CheckAllowed(env *scenario.KubernetesEnv, contextName, namespace string) error {
	if env == nil {
		return fmt.Errorf("check context %q: scenario has no environment.kubernetes allow-list: %w", contextName, ErrNotAllowed)
	}
	contexts := slices.Clone(env.AllowedContexts)
	slices.Sort(contexts)
	contexts = slices.Compact(contexts)
	if !slices.Contains(contexts, contextName) {
		return fmt.Errorf("check context: kubeconfig context %q is %w (environment.kubernetes.allowedContexts: %s)",
			contextName, ErrNotAllowed, quoteList(contexts))
	}
	nss := AllowedNamespaces(env)
	if !slices.Contains(nss, namespace) {
		if len(nss) == 0 {
			return fmt.Errorf("check namespace: namespace %q is %w (no namespace allowed: set environment.kubernetes.namespace or allowedNamespaces)",
				namespace, ErrNotAllowed)
		}
		return fmt.Errorf("check namespace: namespace %q is %w (allowed namespaces: %s)", namespace, ErrNotAllowed, quoteList(nss))
	}
	return nil
}

func quoteList(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
