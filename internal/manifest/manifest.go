// Package manifest reads a container's probe configuration from a
// Kubernetes workload manifest, so a team can replay its real probe
// settings against its service under drill's local runtime (DESIGN
// section 3).
//
// A manifest is YAML with one or more documents ("---"), as kubectl
// accepts, including a v1 List. Documents of kind Deployment,
// StatefulSet, DaemonSet, ReplicaSet, Job, CronJob and Pod are searched;
// other kinds (Service, ConfigMap, ...) are skipped. Workload documents are
// decoded strictly with the k8s.io/api types, so a misspelt field (e.g.
// "livenesProbe") is an error instead of a silently missing probe.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/drillhq/drill/internal/scenario"
)

// Container is what drill takes from a manifest for one container.
type Container struct {
	// Name is the container's name.
	Name string
	// Workload is <Kind>/<metadata.name> of the workload holding it, e.g.
	// Deployment/order-gateway.
	Workload string
	// Probes are the container's startup, liveness and readiness probes as
	// written (zero fields stay zero: the runtime applies the Kubernetes
	// defaults).
	Probes scenario.Probes
	// TerminationGracePeriodSeconds is the pod template's grace in s; nil
	// when the manifest does not set it (Kubernetes default 30).
	TerminationGracePeriodSeconds *int64
}

// workloadKinds are the kinds whose pod template is searched, sorted.
var workloadKinds = []string{"CronJob", "DaemonSet", "Deployment", "Job", "Pod", "ReplicaSet", "StatefulSet"}

// Probes returns the probes of the container named container in the
// manifest at path ("" picks the only container). Errors name the file and
// what is missing: see [Read].
func Probes(path, container string) (scenario.Probes, error) {
	c, err := Read(path, container)
	if err != nil {
		return scenario.Probes{}, err
	}
	return c.Probes, nil
}

// Read returns the container named container of the workload in the
// manifest at path. With container "" the manifest must hold exactly one
// container. Errors: the file cannot be read or parsed (naming the
// document), no workload in it, no such container (listing those there), a
// name found in several workloads, more than one container and no name, or
// a probe drill cannot run (grpc, or no handler).
func Read(path, container string) (Container, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Container{}, fmt.Errorf("read manifest: %w", err)
	}
	var found []Container
	var kinds []string
	rd := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Container{}, fmt.Errorf("manifest %s: document %d: %w", path, doc, err)
		}
		cs, ks, err := decode(raw)
		if err != nil {
			return Container{}, fmt.Errorf("manifest %s: document %d: %w", path, doc, err)
		}
		found = append(found, cs...)
		kinds = append(kinds, ks...)
	}
	if len(found) == 0 {
		seen := "none"
		if len(kinds) > 0 {
			seen = strings.Join(kinds, ", ")
		}
		return Container{}, fmt.Errorf("manifest %s: no workload with containers (want one of %s; kinds found: %s)",
			path, strings.Join(workloadKinds, ", "), seen)
	}
	var match []Container
	for _, c := range found {
		if container == "" || c.Name == container {
			match = append(match, c)
		}
	}
	switch {
	case container == "" && len(match) > 1:
		return Container{}, fmt.Errorf("manifest %s: %d containers (%s); name the one to use with container",
			path, len(match), list(match))
	case len(match) == 0:
		return Container{}, fmt.Errorf("manifest %s: no container %q; containers: %s", path, container, list(found))
	case len(match) > 1:
		return Container{}, fmt.Errorf("manifest %s: container %q is in more than one workload (%s); keep one in the file",
			path, container, list(match))
	}
	c := match[0]
	if err := checkProbes(c); err != nil {
		return Container{}, fmt.Errorf("manifest %s: %s container %s: %w", path, c.Workload, c.Name, err)
	}
	return c, nil
}

func list(cs []Container) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Name + " in " + c.Workload
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// decode reads one document: the containers it holds and, for documents
// without pod templates, their kind (for the "kinds found" message).
func decode(raw []byte) ([]Container, []string, error) {
	if len(bytes.TrimSpace(stripComments(raw))) == 0 {
		return nil, nil, nil
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return nil, nil, fmt.Errorf("parse: %w", err)
	}
	var (
		meta metav1.ObjectMeta
		spec *corev1.PodSpec
	)
	strict := func(obj any) error {
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			return fmt.Errorf("parse %s: %w", tm.Kind, err)
		}
		return nil
	}
	switch tm.Kind {
	case "Deployment":
		var o appsv1.Deployment
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec.Template.Spec
	case "StatefulSet":
		var o appsv1.StatefulSet
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec.Template.Spec
	case "DaemonSet":
		var o appsv1.DaemonSet
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec.Template.Spec
	case "ReplicaSet":
		var o appsv1.ReplicaSet
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec.Template.Spec
	case "Job":
		var o batchv1.Job
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec.Template.Spec
	case "CronJob":
		var o batchv1.CronJob
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec
	case "Pod":
		var o corev1.Pod
		if err := strict(&o); err != nil {
			return nil, nil, err
		}
		meta, spec = o.ObjectMeta, &o.Spec
	case "List", "DeploymentList", "PodList", "StatefulSetList", "DaemonSetList", "ReplicaSetList":
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := yaml.Unmarshal(raw, &l); err != nil {
			return nil, nil, fmt.Errorf("parse %s: %w", tm.Kind, err)
		}
		var cs []Container
		var ks []string
		for i, item := range l.Items {
			c, k, err := decode(item)
			if err != nil {
				return nil, nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			cs, ks = append(cs, c...), append(ks, k...)
		}
		return cs, ks, nil
	case "":
		return nil, nil, errors.New("no kind")
	default:
		return nil, []string{tm.Kind}, nil
	}
	workload := tm.Kind + "/" + meta.Name
	out := make([]Container, 0, len(spec.Containers))
	for _, c := range spec.Containers {
		out = append(out, Container{
			Name:     c.Name,
			Workload: workload,
			Probes: scenario.Probes{
				StartupProbe:   convertProbe(c.StartupProbe),
				LivenessProbe:  convertProbe(c.LivenessProbe),
				ReadinessProbe: convertProbe(c.ReadinessProbe),
			},
			TerminationGracePeriodSeconds: spec.TerminationGracePeriodSeconds,
		})
	}
	return out, nil, nil
}

// stripComments drops full-line YAML comments (a document of only comments
// is empty).
func stripComments(b []byte) []byte {
	var out []byte
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// convertProbe maps a core/v1 Probe to drill's Probe, keeping zero fields
// zero. A gRPC probe or one with no handler converts with no handler set;
// checkProbes reports it for the chosen container only.
func convertProbe(p *corev1.Probe) *scenario.Probe {
	if p == nil {
		return nil
	}
	out := &scenario.Probe{
		InitialDelaySeconds:           p.InitialDelaySeconds,
		PeriodSeconds:                 p.PeriodSeconds,
		TimeoutSeconds:                p.TimeoutSeconds,
		SuccessThreshold:              p.SuccessThreshold,
		FailureThreshold:              p.FailureThreshold,
		TerminationGracePeriodSeconds: p.TerminationGracePeriodSeconds,
	}
	switch {
	case p.HTTPGet != nil:
		a := &scenario.HTTPGetAction{Path: p.HTTPGet.Path, Port: port(p.HTTPGet.Port), Scheme: string(p.HTTPGet.Scheme)}
		for _, h := range p.HTTPGet.HTTPHeaders {
			a.HTTPHeaders = append(a.HTTPHeaders, scenario.HTTPHeader{Name: h.Name, Value: h.Value})
		}
		out.HTTPGet = a
	case p.TCPSocket != nil:
		out.TCPSocket = &scenario.TCPSocketAction{Port: port(p.TCPSocket.Port)}
	case p.Exec != nil:
		out.Exec = &scenario.ExecAction{Command: append([]string(nil), p.Exec.Command...)}
	}
	return out
}

func port(p intstr.IntOrString) any {
	if p.Type == intstr.String {
		return p.StrVal
	}
	return int(p.IntVal)
}

// checkProbes reports probes of c that drill cannot run. Only the chosen
// container is checked, so other containers may use gRPC probes.
func checkProbes(c Container) error {
	for _, p := range []struct {
		field string
		probe *scenario.Probe
	}{
		{"startupProbe", c.Probes.StartupProbe},
		{"livenessProbe", c.Probes.LivenessProbe},
		{"readinessProbe", c.Probes.ReadinessProbe},
	} {
		if p.probe != nil && p.probe.HTTPGet == nil && p.probe.TCPSocket == nil && p.probe.Exec == nil {
			return fmt.Errorf("%s: no httpGet, tcpSocket or exec handler (grpc probes are not supported by the local runtime)", p.field)
		}
	}
	return nil
}
