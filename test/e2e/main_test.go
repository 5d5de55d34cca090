package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/testutil/testproc"
)

// serviceEnv, set to "1" in a replica's environment, makes the test binary
// run as the small service under test instead of running tests.
const serviceEnv = "DRILL_E2E_SERVICE"

func TestMain(m *testing.M) {
	testproc.HelperMain(serviceEnv, serveForDrill)
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// serveForDrill is the service under test of the Toxiproxy cases: it
// listens on 127.0.0.1:$PORT; GET /ready answers 200 without I/O; every
// other request opens a fresh PostgreSQL connection to $DATABASE_URL, runs
// SELECT 1 and closes it (200, or 503 after 800 ms). Fresh connections make
// a remote Toxiproxy count the bytes (it counts them when a connection
// closes), so drill's fault-on-path check sees the traffic. SIGTERM or
// SIGINT shut it down within 1 s. It returns the process exit code.
func serveForDrill() int {
	dsn := os.Getenv("DATABASE_URL")
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", os.Getenv("PORT")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e service: listen:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 800*time.Millisecond)
		defer cancel()
		if err := selectOne(ctx, dsn); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintln(os.Stderr, "e2e service: serve:", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return 0
}

// selectOne connects to dsn, runs SELECT 1 and closes the connection,
// all within ctx.
func selectOne(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("select 1: %w", err)
	}
	if one != 1 {
		return fmt.Errorf("select 1 returned %d", one)
	}
	return nil
}

// bins are drill and toxiproxy-server, built once per test binary
// (lazily, so -short and -run filters that match nothing build nothing).
var bins testproc.Builds

// binaries builds drill (./cmd/drill) and toxiproxy-server (at the version
// in go.mod) into a temp dir and returns their paths.
func binaries(t *testing.T) (drill, toxiproxy string) {
	t.Helper()
	p := bins.Build(t, filepath.Join("..", ".."),
		testproc.Target{Name: "drill", Pkg: "./cmd/drill"},
		testproc.Target{Name: "toxiproxy-server", Pkg: "github.com/Shopify/toxiproxy/v2/cmd/server"})
	return p["drill"], p["toxiproxy-server"]
}
