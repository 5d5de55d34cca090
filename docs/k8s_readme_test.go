package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"
)

// carryRE reads the sentences of scenarios/k8s/README.md that say which of
// the local drill's assertions the kubernetes drills carry and which they
// lack.
var (
	carryRE = regexp.MustCompile(`(?s)carry (\d+) of the local drill's (\d+) assertions,.*?: (.*?)\. They lack\s+(.*?):`)
	nameRE  = regexp.MustCompile("`([a-z0-9-]+)`")
)

// assertionNames returns the names of the assertions of the scenario file
// at path, in order.
func assertionNames(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Assertions []struct {
			Name string `yaml:"name"`
		} `yaml:"assertions"`
	}
	if err := yaml.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var names []string
	for _, a := range s.Assertions {
		names = append(names, a.Name)
	}
	return names
}

// TestK8sReadmeAssertions: scenarios/k8s/README.md names exactly the
// assertions of the local orders-db-brownout drill that both kubernetes
// drills carry and those they lack, with the right counts.
func TestK8sReadmeAssertions(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "scenarios", "k8s", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := carryRE.FindSubmatch(readme)
	if m == nil {
		t.Fatal("scenarios/k8s/README.md lacks \"carry N of the local drill's M assertions, ...: `a`, ... They lack `x`, ...:\"")
	}
	carried, local := string(m[1]), string(m[2])
	var saidCarried, saidLacking []string
	for _, n := range nameRE.FindAllSubmatch(m[3], -1) {
		saidCarried = append(saidCarried, string(n[1]))
	}
	for _, n := range nameRE.FindAllSubmatch(m[4], -1) {
		saidLacking = append(saidLacking, string(n[1]))
	}

	want := assertionNames(t, filepath.Join(root, "scenarios", "orders-db-brownout.yaml"))
	var inK8s, lacking []string
	for _, file := range []string{"orders-db-brownout.yaml", "orders-db-brownout-naive.yaml"} {
		have := assertionNames(t, filepath.Join(root, "scenarios", "k8s", file))
		var in, out []string
		for _, n := range want {
			if slices.Contains(have, n) {
				in = append(in, n)
			} else {
				out = append(out, n)
			}
		}
		for _, n := range have {
			if !slices.Contains(want, n) {
				t.Errorf("scenarios/k8s/%s has assertion %s, which the local drill lacks: the README does not say so", file, n)
			}
		}
		if inK8s != nil && (!slices.Equal(in, inK8s) || !slices.Equal(out, lacking)) {
			t.Errorf("scenarios/k8s/%s carries %v, the other kubernetes drill %v: the README speaks of both at once", file, in, inK8s)
		}
		inK8s, lacking = in, out
	}
	if carried != strconv.Itoa(len(inK8s)) || local != strconv.Itoa(len(want)) {
		t.Errorf("README says %s of %s assertions; the scenario files: %d of %d", carried, local, len(inK8s), len(want))
	}
	if !slices.Equal(saidCarried, inK8s) {
		t.Errorf("README names as carried %v; the kubernetes drills carry %v", saidCarried, inK8s)
	}
	if !slices.Equal(saidLacking, lacking) {
		t.Errorf("README names as lacking %v; the kubernetes drills lack %v", saidLacking, lacking)
	}
}
