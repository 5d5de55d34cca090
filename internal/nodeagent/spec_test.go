package nodeagent

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drillhq/drill/internal/scenario"
)

// mapRefs serves Secrets and ConfigMaps from maps.
type mapRefs struct {
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

func (m mapRefs) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := m.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (m mapRefs) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if c, ok := m.configMaps[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func testPod(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "u-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{c}},
	}
}

func TestBuildProcessSpec(t *testing.T) {
	refs := mapRefs{
		secrets:    map[string]*corev1.Secret{"ns/db": {Data: map[string][]byte{"url": []byte("postgres://x")}}},
		configMaps: map[string]*corev1.ConfigMap{"ns/cfg": {Data: map[string]string{"B": "2", "A": "1"}}},
	}
	yes := true
	c := corev1.Container{
		Name:    "app",
		Command: []string{"drill", "serve", "order-gateway"},
		Args:    []string{"--build", "$(BUILD)", "--literal", "$$(BUILD)", "--unknown", "$(NOPE)"},
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{
			{Name: "BUILD", Value: "correct"},
			{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "url"}}},
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k", Optional: &yes}}},
			{Name: "GREETING", Value: "build=$(BUILD)"},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds:    5,
			FailureThreshold: 3,
			SuccessThreshold: 2,
		},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
	}
	got, err := buildProcessSpec(context.Background(), testPod(c), "192.0.2.7", "192.0.2.1", "/usr/local/bin/drill", refs)
	if err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{"/usr/local/bin/drill", "serve", "order-gateway", "--build", "correct", "--literal", "$(BUILD)", "--unknown", "$(NOPE)"}
	if !reflect.DeepEqual(got.argv, wantArgv) {
		t.Errorf("argv = %q, want %q", got.argv, wantArgv)
	}
	wantEnv := []string{"CFG_A=1", "CFG_B=2", "BUILD=correct", "DATABASE_URL=postgres://x", "POD=web-1", "IP=192.0.2.7", "APP=web", "GREETING=build=correct"}
	if !reflect.DeepEqual(got.env, wantEnv) {
		t.Errorf("env = %q, want %q", got.env, wantEnv)
	}
	wantProbes := scenario.Probes{
		ReadinessProbe: &scenario.Probe{HTTPGet: &scenario.HTTPGetAction{Path: "/ready", Port: "http"}, PeriodSeconds: 5, FailureThreshold: 3, SuccessThreshold: 2},
		LivenessProbe:  &scenario.Probe{TCPSocket: &scenario.TCPSocketAction{Port: "8080"}},
	}
	if !reflect.DeepEqual(got.probes, wantProbes) {
		t.Errorf("probes = %+v, want %+v", got.probes, wantProbes)
	}
	if got.container != "app" {
		t.Errorf("container = %q", got.container)
	}
}

func TestBuildProcessSpecErrors(t *testing.T) {
	base := corev1.Container{Name: "app", Command: []string{"srv"}}
	secretEnv := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}}
	}
	refs := mapRefs{secrets: map[string]*corev1.Secret{"ns/db": {Data: map[string][]byte{"url": []byte("u")}}}}
	tests := []struct {
		name        string
		pod         func() *corev1.Pod
		want        string
		unsupported bool
	}{
		{"two containers", func() *corev1.Pod {
			p := testPod(base)
			p.Spec.Containers = append(p.Spec.Containers, base)
			return p
		}, "has 2 containers", true},
		{"init container", func() *corev1.Pod {
			p := testPod(base)
			p.Spec.InitContainers = []corev1.Container{base}
			return p
		}, "init containers", true},
		{"no command", func() *corev1.Pod { c := base; c.Command = nil; return testPod(c) }, "has no command", true},
		{"grpc probe", func() *corev1.Pod {
			c := base
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 1}}}
			return testPod(c)
		}, "livenessProbe: grpc probe", true},
		{"missing secret", func() *corev1.Pod { c := base; c.Env = []corev1.EnvVar{secretEnv("nope", "url")}; return testPod(c) }, `read Secret nope`, false},
		{"missing key", func() *corev1.Pod { c := base; c.Env = []corev1.EnvVar{secretEnv("db", "pw")}; return testPod(c) }, `Secret db has no key "pw"`, false},
		{"preStop httpGet", func() *corev1.Pod {
			c := base
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/quit"}}}
			return testPod(c)
		}, "lifecycle.preStop", true},
		{"preStop exec other than sleep", func() *corev1.Pod {
			c := base
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/app/drain"}}}}
			return testPod(c)
		}, "lifecycle.preStop.exec", true},
		{"resource field", func() *corev1.Pod {
			c := base
			c.Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}
			return testPod(c)
		}, "valueFrom", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildProcessSpec(context.Background(), tc.pod(), "192.0.2.2", "192.0.2.1", "", refs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if errors.Is(err, errUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(err, errUnsupported) = %t, want %t", !tc.unsupported, tc.unsupported)
			}
		})
	}
}

// TestPreStopSleep: the preStop hooks the agent runs (a sleep action, an
// exec hook that only sleeps) become the sleep before SIGTERM.
func TestPreStopSleep(t *testing.T) {
	exec := func(argv ...string) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: argv}}}
	}
	for _, tc := range []struct {
		name string
		lc   *corev1.Lifecycle
		want time.Duration
	}{
		{"none", nil, 0},
		{"no preStop", &corev1.Lifecycle{}, 0},
		{"sleep action", &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}, 5 * time.Second},
		{"exec sleep", exec("sleep", "3"), 3 * time.Second},
		{"exec /bin/sleep", exec("/bin/sleep", "10"), 10 * time.Second},
		{"sh -c sleep", exec("/bin/sh", "-c", "sleep 7"), 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := corev1.Container{Name: "app", Command: []string{"srv"}, Lifecycle: tc.lc}
			got, err := buildProcessSpec(context.Background(), testPod(c), "192.0.2.2", "192.0.2.1", "", mapRefs{})
			if err != nil {
				t.Fatal(err)
			}
			if got.preStop != tc.want {
				t.Errorf("preStop = %s, want %s", got.preStop, tc.want)
			}
		})
	}
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"plain":       "plain",
		"$(A)":        "1",
		"x$(A)y$(B)z": "x1ytwoz",
		"$$(A)":       "$(A)",
		"$(C)":        "$(C)",
		"$A":          "$A",
		"$(A":         "$(A",
		"end$":        "end$",
		"$$":          "$",
	} {
		if got := expandVars(in, vars); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIPPool(t *testing.T) {
	p := newIPPool()
	a, _ := p.allocate("a")
	b, _ := p.allocate("b")
	if a != "192.0.2.2" || b != "192.0.2.3" {
		t.Fatalf("first addresses %s %s", a, b)
	}
	p.release(a)
	c, _ := p.allocate("c")
	if c != "192.0.2.4" {
		t.Errorf("a released address is reused at once: got %s, want 192.0.2.4", c)
	}
	for i := 0; i < 251; i++ { // 192.0.2.5-254, then 192.0.2.2 again
		if _, err := p.allocate("x"); err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
	}
	if _, err := p.allocate("full"); !errors.Is(err, errPoolFull) {
		t.Fatalf("253 addresses in use: err = %v, want errPoolFull", err)
	}
	p.release("192.0.2.100")
	if got, _ := p.allocate("again"); got != "192.0.2.100" {
		t.Errorf("after release in a full pool got %s, want 192.0.2.100", got)
	}
}
