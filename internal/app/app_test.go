package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drillhq/drill/internal/exitcode"
)

// drill runs the CLI in-process from the repository root and returns its
// exit code, stdout and stderr.
func drill(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Execute(context.Background(), &out, &errb, args, func(string) string { return "" })
	return code, out.String(), errb.String()
}

func TestInvalidScenariosExitTwoAndTouchNothing(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	files, err := filepath.Glob("testdata/scenarios/invalid/*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("want at least 30 invalid fixtures, got %d (%v)", len(files), err)
	}
	located := regexp.MustCompile(`^\S+\.yaml:\d+:\d+: `)
	reports := filepath.Join(t.TempDir(), "reports")
	for _, file := range files {
		want, err := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".err")
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"validate", "plan", "run"} {
			code, stdout, stderr := drill(t, cmd, "--out", reports, file)
			if code != 2 {
				t.Errorf("drill %s %s: exit %d, want 2; stderr:\n%s", cmd, file, code, stderr)
			}
			if stdout != "" {
				t.Errorf("drill %s %s: stdout %q, want nothing", cmd, file, stdout)
			}
			if stderr != string(want) {
				t.Errorf("drill %s %s: stderr differs from the golden file\n got:\n%s\nwant:\n%s", cmd, file, stderr, want)
			}
			for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
				if !located.MatchString(line) {
					t.Errorf("drill %s %s: line does not name file:line:col: %q", cmd, file, line)
				}
			}
		}
	}
	if _, err := os.Stat(reports); !os.IsNotExist(err) {
		t.Errorf("an invalid scenario left %s behind (stat: %v)", reports, err)
	}
}

func TestValidate(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	files, _ := filepath.Glob("scenarios/*.yaml")
	code, stdout, stderr := drill(t, append([]string{"validate"}, files...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("validate shipped scenarios: exit %d, stderr:\n%s", code, stderr)
	}
	for _, f := range files {
		if !strings.Contains(stdout, "ok  "+f+"\n") {
			t.Errorf("stdout lacks %q:\n%s", "ok  "+f, stdout)
		}
	}

	code, stdout, stderr = drill(t, "validate", "scenarios/orders-db-brownout.yaml", "testdata/scenarios/invalid/rate-zero.yaml", "testdata/scenarios/invalid/typo-key.yaml")
	if code != 2 {
		t.Errorf("mixed files: exit %d, want 2", code)
	}
	if stdout != "ok  scenarios/orders-db-brownout.yaml\n" {
		t.Errorf("mixed files: stdout %q", stdout)
	}
	if !strings.Contains(stderr, "rate-zero.yaml:20:11: streams[0].rate: rate must be above 0") ||
		!strings.Contains(stderr, `typo-key.yaml:25:5: faults[0].latncy: unknown key "latncy"; did you mean "latency"?`) {
		t.Errorf("mixed files: stderr lacks an error:\n%s", stderr)
	}
}

// TestValidateStdin: "drill validate -" reads the scenario from standard
// input; relative manifest paths resolve against the working directory.
func TestValidateStdin(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	good, err := os.ReadFile("scenarios/orders-db-brownout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := os.ReadFile("testdata/scenarios/invalid/rate-zero.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// From the repository root its manifests/ path does not resolve; the
	// message says why.
	var out, errOut bytes.Buffer
	err = Run(context.Background(), &Globals{Stdout: &out, Stderr: &errOut, Stdin: bytes.NewReader(good)}, []string{"validate", "-"})
	if exitcode.Code(err) != exitcode.BadInput || !strings.Contains(fmt.Sprint(err), "resolve against the working directory") {
		t.Errorf("from the root: err %v, want exit 2 explaining where relative paths resolve", err)
	}
	t.Chdir("scenarios") // its manifests/ are relative to the scenario file
	for _, tc := range []struct {
		name, in, stdout, stderr string
		code                     int
	}{
		{name: "valid", in: string(good), stdout: "ok  <stdin>\n"},
		{name: "invalid", in: string(bad), code: exitcode.BadInput,
			stderr: "<stdin>:20:11: streams[0].rate: rate must be above 0"},
		{name: "empty", in: "", code: exitcode.BadInput, stderr: "<stdin>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			g := &Globals{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(tc.in)}
			err := Run(context.Background(), g, []string{"validate", "-"})
			if code := exitcode.Code(err); code != tc.code {
				t.Fatalf("exit %d, want %d (err %v)", code, tc.code, err)
			}
			if out.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tc.stdout)
			}
			if tc.stderr != "" && (err == nil || !strings.Contains(err.Error(), tc.stderr)) {
				t.Errorf("error %v, want it to contain %q", err, tc.stderr)
			}
		})
	}
	// plan reads standard input the same way.
	var planOut bytes.Buffer
	g := &Globals{Stdout: &planOut, Stderr: &errOut, Stdin: bytes.NewReader(good)}
	if err := Run(context.Background(), g, []string{"plan", "-"}); err != nil || !strings.Contains(planOut.String(), "t+") {
		t.Errorf("plan -: err %v, output %q; want the timeline", err, planOut.String())
	}
}

func TestUsageErrors(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"validate", "--nope", "x.yaml"}, "unknown flag: --nope"},
		{"no file", []string{"validate"}, "requires at least 1 arg"},
		{"plan two files", []string{"plan", "a.yaml", "b.yaml"}, "drill plan takes 1 argument (a scenario file), got 2"},
		{"bad log format", []string{"--log-format", "xml", "version"}, `invalid --log-format "xml"`},
		{"bad plan output", []string{"plan", "-o", "yaml", "scenarios/orders-db-brownout.yaml"}, `invalid --output "yaml"`},
		{"missing file", []string{"validate", "no/such.yaml"}, "no/such.yaml: read scenario: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := drill(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, tt.want) || strings.Count(stderr, tt.want) != 1 {
				t.Errorf("stderr %q, want %q once", stderr, tt.want)
			}
		})
	}
}

func TestPlanPrintsTimeline(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	code, stdout, stderr := drill(t, "plan", "scenarios/payment-tax-brownout.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`t\+20\.000s +fault-on +tax-brownout +latency latency=8s stream=downstream on proxy tax-api`,
		`t\+140\.000s +window-start +recovery:tax-brownout +until t\+160\.000s`, `auth-p99 +latency +fault:tax-brownout`, `t\+170\.000s +run-end`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("plan lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = drill(t, "plan", "-o", "json", "scenarios/payment-tax-brownout.yaml")
	var p struct {
		Windows []struct{ Name string } `json:"windows"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &p) != nil || len(p.Windows) != 4 {
		t.Errorf("plan -o json: exit %d, windows %+v", code, p.Windows)
	}
}

func TestSchemaAndVersion(t *testing.T) {
	code, stdout, _ := drill(t, "schema")
	var schema map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &schema) != nil || schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("schema: exit %d, not a 2020-12 JSON Schema: %.200s", code, stdout)
	}
	code, stdout, _ = drill(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "drill dev (go") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
}
