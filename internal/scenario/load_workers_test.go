package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadWorkersValidation: load.workers is for kubernetes scenarios,
// needs an image and a shareable schedule; each problem is reported at
// its key.
func TestLoadWorkersValidation(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "testdata", "scenarios", "valid", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	local := strings.Replace(string(base), "  type: kubernetes\n", "  type: local\n", 1)
	tests := []struct {
		name string
		doc  string
		load string
		want []string // substrings of the error; none: valid
	}{
		{"none", string(base), "", nil},
		{"three workers", string(base), "load:\n  workers: 3\n  image: registry.example.com/drill:1.4\n", nil},
		{"zero workers", string(base), "load:\n  workers: 0\n", nil},
		{"no image", string(base), "load:\n  workers: 3\n", []string{"load.image: load.workers needs image"}},
		{"image alone", string(base), "load:\n  image: drill:1\n", []string{"load.image: image is for load workers"}},
		{"too many", string(base), "load:\n  workers: 1001\n  image: drill:1\n", []string{"load.workers: workers 1001 must be within 0..1000"}},
		{"negative", string(base), "load:\n  workers: -1\n  image: drill:1\n", []string{"load.workers: workers -1"}},
		{"local", local, "load:\n  workers: 2\n  image: drill:1\n", []string{"load.workers: load workers run as a Kubernetes Job"}},
		{"as fast as possible", strings.Replace(string(base), "rate: 500/s", "rate: 0/s\n    maxWorkers: 10", 1), "load:\n  workers: 2\n  image: drill:1\n",
			[]string{"streams[0].rate: a stream spread over load workers needs a schedule"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(tc.doc, "faults:\n", tc.load+"faults:\n", 1)
			_, err := LoadReader("w.yaml", strings.NewReader(doc))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, got valid", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
