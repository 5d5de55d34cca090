package dependencies

import (
	"fmt"

	"github.com/drillhq/drill/internal/netport"
)

// FreePort returns a free TCP port on 127.0.0.1 outside the kernel's
// ephemeral range (internal/netport), so no outgoing connection takes it
// before the caller's process listens on it; another program naming the
// same port still could. A throwaway PostgreSQL gets its port from it,
// and so do the end-to-end tests' own servers. Errors: no free port.
func FreePort() (int, error) {
	ports, err := netport.Free(1)
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return ports[0], nil
}
