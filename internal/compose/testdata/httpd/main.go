// Command httpd is the compose package's test service: it serves on :8080
// ("serve"), answers /healthz 200 until /sick is asked (then 503), exits
// with code 3 on /exit, and probes a URL ("probe URL") as a HEALTHCHECK.
// With HTTPD_IGNORE_TERM=1 it ignores SIGTERM (only SIGKILL ends it);
// otherwise SIGTERM ends it at once with exit code 143.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/compose"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "probe" {
		if err := compose.Probe(context.Background(), os.Args[2], 2*time.Second); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ok")
		return
	}
	if os.Getenv("HTTPD_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		// As PID 1 of its container a default disposition would be
		// ignored by the kernel: exit as a shell's child would.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() { <-term; os.Exit(143) }()
	}
	var sick atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if sick.Load() {
			http.Error(w, "sick", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/sick", func(w http.ResponseWriter, _ *http.Request) { sick.Store(true); fmt.Fprintln(w, "sick now") })
	mux.HandleFunc("/well", func(w http.ResponseWriter, _ *http.Request) { sick.Store(false); fmt.Fprintln(w, "well now") })
	mux.HandleFunc("/exit", func(http.ResponseWriter, *http.Request) { os.Exit(3) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		name, _ := os.Hostname()
		fmt.Fprintf(w, "%s %s\n", name, r.URL.Path)
	})
	if err := http.ListenAndServe(":8080", mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
