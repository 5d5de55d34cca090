package app

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExport: the metrics file of a real run is OpenMetrics with the
// grouping labels; an unreachable Pushgateway is exit 3 naming the URL;
// a bad URL, no target and an unreadable run are exit 2.
func TestExport(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	file := filepath.Join(t.TempDir(), "drill.prom")
	code, _, stderr := drill(t, "export", night1, "--metrics-file", file, "--environment", "staging")
	if code != 0 {
		t.Fatalf("export --metrics-file: exit %d, stderr:\n%s", code, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`drill_run_exit_code{environment="staging",scenario="orders-db-brownout-short"} 0`,
		`drill_stream_latency_seconds{environment="staging",quantile="0.99",scenario="orders-db-brownout-short",stream="orders",window="baseline"}`,
		`drill_finding_seconds{environment="staging",figure="length",finding="unroutable",scenario="orders-db-brownout-short",subject="order-gateway in pg-pause"}`,
		"# EOF\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics file lacks %q", want)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unreachable", []string{night1, "--pushgateway", gone}, 3, "Pushgateway " + gone},
		{"bad URL", []string{night1, "--pushgateway", "localhost:9091"}, 2, `--pushgateway "localhost:9091" is not an http(s) URL`},
		{"no target", []string{night1}, 2, "give --pushgateway URL, --metrics-file FILE or both"},
		{"missing run", []string{"nope.json", "--metrics-file", file}, 2, "nope.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := drill(t, append([]string{"export"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr:\n%s\nwant it to contain %q", code, tc.code, stderr, tc.want)
			}
		})
	}
}
