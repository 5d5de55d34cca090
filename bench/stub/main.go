// Command stub is the benchmarks' trivial HTTP server: every request gets
// 200 and a 2-byte body, after -hold (default 0: at once; the hanging
// target of the benchmarks holds every request 2 s, as a stalled system
// does). It listens on each -addr (default one random loopback port) and
// prints "listening http://ADDR" per listener, then serves until killed.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	addrs := flag.String("addr", "127.0.0.1:0", "comma-separated listen addresses")
	hold := flag.Duration("hold", 0, "how long to hold each request before answering")
	flag.Parse()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if *hold > 0 {
			t := time.NewTimer(*hold)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
	errc := make(chan error, 1)
	for _, a := range strings.Split(*addrs, ",") {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stub:", err)
			os.Exit(1)
		}
		fmt.Printf("listening http://%s\n", ln.Addr())
		go func() { errc <- http.Serve(ln, h) }()
	}
	fmt.Fprintln(os.Stderr, "stub:", <-errc)
	os.Exit(1)
}
