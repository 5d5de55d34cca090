package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drillhq/drill/internal/scenario"
)

// drillArgv0 lists the argv[0] values that mean "the running drill": the
// bare name and the path in drill's FROM-scratch image (/drill).
var drillArgv0 = []string{"drill", "/drill"}

// processSpec is what it takes to run a pod's container as a local process.
type processSpec struct {
	container string
	argv      []string
	// env is the container's environment in order (KEY=VALUE), without PORT.
	env    []string
	probes scenario.Probes
	// preStop is the container's preStop sleep (0: none), run before
	// SIGTERM within the grace period as the kubelet runs the hook.
	preStop time.Duration
}

// refGetter reads the Secrets and ConfigMaps a container's environment
// refers to. Implementations return an error wrapping a NotFound API error
// when the object does not exist.
type refGetter interface {
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// errUnsupported marks a pod the agent cannot run (more than one container,
// init containers, a gRPC probe, no command). Such a pod stays Pending with
// reason CreateContainerConfigError; retrying does not help.
var errUnsupported = errors.New("not supported by the drill node agent")

// buildProcessSpec turns the pod's only container into a local process:
// argv is command followed by args with $(VAR) references expanded from the
// container's environment (argv[0] "drill" or "/drill" becomes executable),
// env is the container's envFrom then env entries (valueFrom: fieldRef of
// metadata.name/namespace/uid/labels/annotations, spec.nodeName,
// spec.serviceAccountName, status.podIP/hostIP; secretKeyRef;
// configMapKeyRef), and the probes are the container's. podIP and hostIP are
// the addresses the agent reports. Errors wrap errUnsupported for pods the
// agent can never run, else say which reference could not be resolved.
func buildProcessSpec(ctx context.Context, pod *corev1.Pod, podIP, hostIP, executable string, refs refGetter) (processSpec, error) {
	if n := len(pod.Spec.Containers); n != 1 {
		return processSpec{}, fmt.Errorf("pod %s/%s has %d containers: %w (one container per pod)", pod.Namespace, pod.Name, n, errUnsupported)
	}
	if len(pod.Spec.InitContainers) > 0 {
		return processSpec{}, fmt.Errorf("pod %s/%s has init containers: %w", pod.Namespace, pod.Name, errUnsupported)
	}
	c := pod.Spec.Containers[0]
	if len(c.Command) == 0 {
		return processSpec{}, fmt.Errorf("container %s of pod %s/%s has no command: %w (the agent cannot read an image's entrypoint; set command)",
			c.Name, pod.Namespace, pod.Name, errUnsupported)
	}
	probes, err := convertProbes(c)
	if err != nil {
		return processSpec{}, fmt.Errorf("container %s of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
	}
	preStop, err := preStopSleep(c)
	if err != nil {
		return processSpec{}, fmt.Errorf("container %s of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
	}
	env, err := containerEnv(ctx, pod, c, podIP, hostIP, refs)
	if err != nil {
		return processSpec{}, fmt.Errorf("container %s of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expandVars(a, vars))
	}
	for _, d := range drillArgv0 {
		if argv[0] == d && executable != "" {
			argv[0] = executable
			break
		}
	}
	return processSpec{container: c.Name, argv: argv, env: env, probes: probes, preStop: preStop}, nil
}

// preStopSleep is the sleep of c's preStop hook: the sleep action
// (lifecycle.preStop.sleep.seconds) or an exec hook that only sleeps
// (["sleep", "N"], ["/bin/sleep", "N"], or sh -c "sleep N"), the common
// way to hold a pod in routing until the proxies have taken it out. 0 when
// c has no preStop hook. Any other hook (httpGet, tcpSocket, another
// command) is an error wrapping errUnsupported: the agent cannot run it,
// and ending the pod without it would judge a different shutdown than the
// cluster's.
func preStopSleep(c corev1.Container) (time.Duration, error) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0, nil
	}
	h := c.Lifecycle.PreStop
	switch {
	case h.Sleep != nil:
		if h.Sleep.Seconds < 0 {
			return 0, fmt.Errorf("lifecycle.preStop.sleep.seconds: must be >= 0, got %d", h.Sleep.Seconds)
		}
		return time.Duration(h.Sleep.Seconds) * time.Second, nil
	case h.Exec != nil:
		if d, ok := sleepCommand(h.Exec.Command); ok {
			return d, nil
		}
		return 0, fmt.Errorf("lifecycle.preStop.exec %q: %w (a preStop exec hook must only sleep: sleep N, or sh -c \"sleep N\")",
			h.Exec.Command, errUnsupported)
	}
	return 0, fmt.Errorf("lifecycle.preStop: %w (sleep, or an exec hook that only sleeps)", errUnsupported)
}

// sleepCommand recognises a command that only sleeps N whole seconds.
func sleepCommand(argv []string) (time.Duration, bool) {
	if len(argv) == 3 && (argv[0] == "sh" || argv[0] == "/bin/sh" || argv[0] == "bash" || argv[0] == "/bin/bash") && argv[1] == "-c" {
		argv = strings.Fields(argv[2])
	}
	if len(argv) != 2 || (argv[0] != "sleep" && argv[0] != "/bin/sleep" && argv[0] != "/usr/bin/sleep") {
		return 0, false
	}
	n, err := strconv.ParseUint(argv[1], 10, 32)
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// containerEnv resolves c's envFrom and env, in the kubelet's order (envFrom
// first, then env; a later entry wins), expanding $(VAR) in env values from
// the entries before it.
func containerEnv(ctx context.Context, pod *corev1.Pod, c corev1.Container, podIP, hostIP string, refs refGetter) ([]string, error) {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for i, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := refs.ConfigMap(ctx, pod.Namespace, from.ConfigMapRef.Name)
			if err != nil {
				if optional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom[%d]: read ConfigMap %s: %w", i, from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := refs.Secret(ctx, pod.Namespace, from.SecretRef.Name)
			if err != nil {
				if optional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom[%d]: read Secret %s: %w", i, from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for i, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expandVars(e.Value, vals))
			continue
		}
		v, ok, err := valueFrom(ctx, pod, e.ValueFrom, podIP, hostIP, refs)
		if err != nil {
			return nil, fmt.Errorf("env[%d] (%s): %w", i, e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

func optional(b *bool) bool { return b != nil && *b }

// valueFrom resolves one env valueFrom; ok is false for a missing optional key.
func valueFrom(ctx context.Context, pod *corev1.Pod, src *corev1.EnvVarSource, podIP, hostIP string, refs refGetter) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, src.FieldRef.FieldPath, podIP, hostIP)
		return v, err == nil, err
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		s, err := refs.Secret(ctx, pod.Namespace, r.Name)
		if err != nil {
			if optional(r.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("read Secret %s: %w", r.Name, err)
		}
		b, ok := s.Data[r.Key]
		if !ok {
			if v, ok2 := s.StringData[r.Key]; ok2 {
				return v, true, nil
			}
			if optional(r.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("Secret %s has no key %q", r.Name, r.Key)
		}
		return string(b), true, nil
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		cm, err := refs.ConfigMap(ctx, pod.Namespace, r.Name)
		if err != nil {
			if optional(r.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("read ConfigMap %s: %w", r.Name, err)
		}
		v, ok := cm.Data[r.Key]
		if !ok {
			if optional(r.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("ConfigMap %s has no key %q", r.Name, r.Key)
		}
		return v, true, nil
	}
	return "", false, fmt.Errorf("valueFrom: %w (fieldRef, secretKeyRef and configMapKeyRef only)", errUnsupported)
}

// fieldValue resolves a downward-API fieldRef path.
func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("fieldRef %q: %w", path, errUnsupported)
}

// expandVars expands $(NAME) from vars as the kubelet does: $$ is a literal
// $, and a reference to an unknown name is left as written.
func expandVars(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// convertProbes maps the container's core/v1 probes to the local runtime's.
// The probe's port is not used: the process listens on its own $PORT.
func convertProbes(c corev1.Container) (scenario.Probes, error) {
	var out scenario.Probes
	for _, p := range []struct {
		name string
		in   *corev1.Probe
		out  **scenario.Probe
	}{
		{"startupProbe", c.StartupProbe, &out.StartupProbe},
		{"livenessProbe", c.LivenessProbe, &out.LivenessProbe},
		{"readinessProbe", c.ReadinessProbe, &out.ReadinessProbe},
	} {
		if p.in == nil {
			continue
		}
		sp, err := convertProbe(p.in)
		if err != nil {
			return scenario.Probes{}, fmt.Errorf("%s: %w", p.name, err)
		}
		*p.out = sp
	}
	return out, nil
}

func convertProbe(in *corev1.Probe) (*scenario.Probe, error) {
	p := &scenario.Probe{
		InitialDelaySeconds:           in.InitialDelaySeconds,
		PeriodSeconds:                 in.PeriodSeconds,
		TimeoutSeconds:                in.TimeoutSeconds,
		SuccessThreshold:              in.SuccessThreshold,
		FailureThreshold:              in.FailureThreshold,
		TerminationGracePeriodSeconds: in.TerminationGracePeriodSeconds,
	}
	switch h := in.ProbeHandler; {
	case h.HTTPGet != nil:
		a := &scenario.HTTPGetAction{Path: h.HTTPGet.Path, Port: h.HTTPGet.Port.String(), Scheme: string(h.HTTPGet.Scheme)}
		if a.Path == "" {
			a.Path = "/"
		}
		for _, hd := range h.HTTPGet.HTTPHeaders {
			a.HTTPHeaders = append(a.HTTPHeaders, scenario.HTTPHeader{Name: hd.Name, Value: hd.Value})
		}
		p.HTTPGet = a
	case h.TCPSocket != nil:
		p.TCPSocket = &scenario.TCPSocketAction{Port: h.TCPSocket.Port.String()}
	case h.Exec != nil:
		p.Exec = &scenario.ExecAction{Command: append([]string(nil), h.Exec.Command...)}
	case h.GRPC != nil:
		return nil, fmt.Errorf("grpc probe: %w", errUnsupported)
	default:
		return nil, errors.New("no handler (httpGet, tcpSocket or exec)")
	}
	return p, nil
}

// apiRefs reads Secrets and ConfigMaps through a typed client.
type apiRefs struct {
	secret    func(ctx context.Context, ns, name string, o metav1.GetOptions) (*corev1.Secret, error)
	configMap func(ctx context.Context, ns, name string, o metav1.GetOptions) (*corev1.ConfigMap, error)
}

func (a apiRefs) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return a.secret(ctx, ns, name, metav1.GetOptions{})
}

func (a apiRefs) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return a.configMap(ctx, ns, name, metav1.GetOptions{})
}
