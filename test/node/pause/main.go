// Command pause is the pod sandbox process of the test node (package
// test/node): the container that holds a pod's network namespace while the
// pod's own containers come and go. The kubelet's runtime (containerd's CRI
// plugin, sandbox_image) starts it as PID 1 of the sandbox; it sleeps until
// SIGTERM or SIGINT and exits 0. It is built static (CGO_ENABLED=0) and put
// alone in a FROM scratch image, so that nothing is pulled from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of its namespace the process gets no default action for
	// SIGTERM: without a handler it would ignore it and be SIGKILLed only
	// after the runtime's timeout.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	os.Exit(0)
}
