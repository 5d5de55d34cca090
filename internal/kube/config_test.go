package kube

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/scenario"
)

const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
- name: c2
  cluster:
    server: https://127.0.0.2:6443
users:
- name: u
  user:
    token: secret
contexts:
- name: a
  context: {cluster: c1, user: u, namespace: team-a}
- name: b
  context: {cluster: c2, user: u}
`

const thirdContext = `apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c3
  cluster:
    server: https://127.0.0.3:6443
users:
- name: u3
  user:
    token: other
contexts:
- name: c
  context: {cluster: c3, user: u3, namespace: team-c}
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	ab := writeFile(t, dir, "ab.yaml", twoContexts)
	c := writeFile(t, dir, "c.yaml", thirdContext)
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name       string
		env        string // KUBECONFIG
		flag       string // --kubeconfig
		context    string
		namespace  string
		wantCtx    string
		wantNS     string
		wantServer string
		wantErr    string
	}{
		{name: "env current context", env: ab, wantCtx: "a", wantNS: "team-a", wantServer: "https://127.0.0.1:6443"},
		{name: "context flag", env: ab, context: "b", wantCtx: "b", wantNS: "default", wantServer: "https://127.0.0.2:6443"},
		{name: "namespace flag", env: ab, context: "b", namespace: "x", wantCtx: "b", wantNS: "x"},
		{name: "path list first wins current-context", env: missing + ":" + c + ":" + ab, wantCtx: "c", wantNS: "team-c", wantServer: "https://127.0.0.3:6443"},
		{name: "path list merges contexts", env: c + ":" + ab, context: "a", wantCtx: "a", wantNS: "team-a", wantServer: "https://127.0.0.1:6443"},
		{name: "explicit flag wins over env", env: c, flag: ab, wantCtx: "a", wantNS: "team-a"},
		{name: "explicit missing file", env: ab, flag: missing, wantErr: "missing.yaml"},
		{name: "unknown context lists available", env: ab, context: "prod", wantErr: `context "prod" not found; contexts: a, b`},
		{name: "no config", env: missing, wantErr: "no current-context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", dir)
			t.Setenv("KUBECONFIG", tt.env)
			cfg, err := Load(tt.flag, tt.context, tt.namespace)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Context != tt.wantCtx || cfg.Namespace != tt.wantNS {
				t.Errorf("context/namespace = %q/%q, want %q/%q", cfg.Context, cfg.Namespace, tt.wantCtx, tt.wantNS)
			}
			if tt.wantServer != "" && cfg.Rest.Host != tt.wantServer {
				t.Errorf("host = %q, want %q", cfg.Rest.Host, tt.wantServer)
			}
			if cfg.Rest.QPS != DefaultQPS || cfg.Rest.Burst != DefaultBurst {
				t.Errorf("QPS/Burst = %v/%v", cfg.Rest.QPS, cfg.Rest.Burst)
			}
			if _, err := cfg.Clientset(); err != nil {
				t.Errorf("Clientset: %v", err)
			}
		})
	}
}

func TestCheckAllowed(t *testing.T) {
	env := &scenario.KubernetesEnv{AllowedContexts: []string{"staging", "kind-drill"}, Namespace: "drill"}
	multi := &scenario.KubernetesEnv{AllowedContexts: []string{"staging"}, AllowedNamespaces: []string{"b", "a"}, Namespace: "a"}
	tests := []struct {
		name    string
		env     *scenario.KubernetesEnv
		ctx, ns string
		wantErr string
	}{
		{name: "allowed", env: env, ctx: "staging", ns: "drill"},
		{name: "other allowed context", env: env, ctx: "kind-drill", ns: "drill"},
		{name: "context refused", env: env, ctx: "prod", ns: "drill", wantErr: `kubeconfig context "prod" is not in the scenario's allow-list (environment.kubernetes.allowedContexts: "kind-drill", "staging")`},
		{name: "namespace refused", env: env, ctx: "staging", ns: "kube-system", wantErr: `namespace "kube-system" is not in the scenario's allow-list (allowed namespaces: "drill")`},
		{name: "allowedNamespaces", env: multi, ctx: "staging", ns: "b"},
		{name: "allowedNamespaces refuse", env: multi, ctx: "staging", ns: "c", wantErr: `allowed namespaces: "a", "b"`},
		{name: "no namespace allowed", env: &scenario.KubernetesEnv{AllowedContexts: []string{"x"}}, ctx: "x", ns: "default", wantErr: "no namespace allowed"},
		{name: "nil env", env: nil, ctx: "x", ns: "y", wantErr: "no environment.kubernetes allow-list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckAllowed(tt.env, tt.ctx, tt.ns)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckAllowed: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckAllowed error = %v, want containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrNotAllowed) {
				t.Errorf("error %v does not wrap ErrNotAllowed", err)
			}
		})
	}
}
