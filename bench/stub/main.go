// Command stub is the benchmarks' trivial HTTP server: every request gets
// 200 and a 2-byte body. It listens on each -addr (default one random
// loopback port) and prints "listening http://ADDR" per listener, then
// serves until killed.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

func main() {
	addrs := flag.String("addr", "127.0.0.1:0", "comma-separated listen addresses")
	flag.Parse()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
