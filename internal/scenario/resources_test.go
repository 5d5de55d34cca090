package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCPUQuantity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		millis  int64
		str     string
		wantErr string
	}{
		{in: "500m", millis: 500, str: "500m"},
		{in: "1", millis: 1000, str: "1"},
		{in: "1.5", millis: 1500, str: "1500m"},
		{in: "0.25", millis: 250, str: "250m"},
		{in: ".5", millis: 500, str: "500m"},
		{in: "2000m", millis: 2000, str: "2"},
		{in: " 200m ", millis: 200, str: "200m"},
		{in: "0.001", millis: 1, str: "1m"},
		{in: "", wantErr: "empty"},
		{in: "0", wantErr: "must be above 0"},
		{in: "0m", wantErr: "must be above 0"},
		{in: "-1", wantErr: "not a number of cores"},
		{in: "1.5m", wantErr: "millicores must be a whole number"},
		{in: "0.0005", wantErr: "finer than 1m"},
		{in: "500Mi", wantErr: "not a number of cores"},
		{in: "1e3", wantErr: "not a number of cores"},
		{in: "half", wantErr: "not a number of cores"},
		{in: "m", wantErr: "millicores must be a whole number"},
		{in: "1.", wantErr: "not a number of cores"},
		{in: "100001", wantErr: "above drill's limit"},
		{in: "99999999999999m", wantErr: "millicores must be a whole number"},
	} {
		q, err := ParseCPUQuantity(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseCPUQuantity(%q) = %v, %v; want an error containing %q", tc.in, q, err, tc.wantErr)
			}
			continue
		}
		if err != nil || q.Millis() != tc.millis || q.String() != tc.str {
			t.Errorf("ParseCPUQuantity(%q) = %d (%s), %v; want %d (%s)", tc.in, q.Millis(), q, err, tc.millis, tc.str)
		}
	}
}

// TestCPULimitInlineAndManifest: resources.limits.cpu is read from the
// scenario (a YAML number or string) and from a Deployment manifest; the
// inline value wins; a bad one is refused at its file:line:col with its
// field path, also inside the manifest.
func TestCPULimitInlineAndManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	manifest := `apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  template:
    spec:
      containers:
        - name: app
          image: app
          resources:
            requests: {cpu: 100m, memory: 64Mi}
            limits:
              memory: 128Mi
              cpu: %s
`
	write := func(name, cpu string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Replace(manifest, "%s", cpu, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.yaml", `"500m"`)
	write("bad.yaml", `500Mi`)
	svc := func(extra string) string {
		return minimal + "services:\n  - name: app\n    command: [./app]\n" + extra
	}
	for _, tc := range []struct {
		name    string
		src     string
		want    CPUQuantity
		wantErr string
	}{
		{name: "none", src: svc(""), want: 0},
		{name: "inline string", src: svc("    resources: {limits: {cpu: 200m}}\n"), want: 200},
		{name: "inline number", src: svc("    resources:\n      limits:\n        cpu: 1.5\n"), want: 1500},
		{name: "manifest", src: svc("    manifest: {path: good.yaml}\n"), want: 500},
		{name: "inline wins", src: svc("    manifest: {path: good.yaml}\n    resources: {limits: {cpu: 2}}\n"), want: 2000},
		{name: "bad inline", src: svc("    resources:\n      limits:\n        cpu: 250x\n"),
			wantErr: `t.yaml:24:14: services[0].resources.limits.cpu: invalid CPU quantity "250x"`},
		{name: "bad in manifest", src: svc("    manifest: {path: bad.yaml}\n"),
			wantErr: `bad.yaml:14:20: services[0].resources.limits.cpu: invalid CPU quantity "500Mi"`},
		{name: "unknown limit key", src: svc("    resources: {limits: {memory: 1Gi}}\n"),
			wantErr: `services[0].resources.limits.memory: unknown key "memory"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := load(filepath.Join(dir, "t.yaml"), []byte(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Services[0].CPULimit(); got != tc.want {
				t.Errorf("CPULimit = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestSUTPriority: environment.local.sutPriority defaults to lower, takes
// lower or same, and is refused elsewhere.
func TestSUTPriority(t *testing.T) {
	t.Parallel()
	s := mustParse(t, minimal)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Environment.Local == nil || s.Environment.Local.SUTPriority != SUTPriorityLower {
		t.Errorf("default sutPriority %+v, want lower", s.Environment.Local)
	}
	for _, tc := range []struct{ env, wantErr string }{
		{env: "environment:\n  local: {sutPriority: same}\n"},
		{env: "environment:\n  local: {sutPriority: lower}\n"},
		{env: "environment:\n  local: {sutPriority: higher}\n", wantErr: `environment.local.sutPriority: unknown sutPriority "higher"`},
		{env: "environment:\n  type: kubernetes\n  kubernetes: {allowedContexts: [c], namespace: n}\n  local: {sutPriority: same}\n",
			wantErr: "environment.local: applies only to environment type local"},
	} {
		s := mustParse(t, strings.Replace(minimal, "timeline:", tc.env+"timeline:", 1))
		err := s.Validate()
		if tc.wantErr == "" && err != nil {
			t.Errorf("%q: %v", tc.env, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q: error %v, want it to contain %q", tc.env, err, tc.wantErr)
		}
	}
}
