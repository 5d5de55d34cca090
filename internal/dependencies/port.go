package dependencies

import (
	"fmt"
	"net"
)

// FreePort asks the kernel for a free TCP port on 127.0.0.1: the port of a
// listener it opens and closes again, so another process may take it
// before the caller listens on it. A throwaway PostgreSQL gets its port
// from it, and so do the end-to-end tests' own servers. Errors: no
// listener could be opened.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
