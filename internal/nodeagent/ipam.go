package nodeagent

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/drillhq/drill/internal/netport"
)

// DefaultNodeIP is the node's InternalIP and every pod's hostIP: the first
// address of TEST-NET-1 (RFC 5737), which routes nowhere. EndpointSlice
// validation rejects loopback addresses, so the agent reports documentation
// addresses and maps them back to loopback listeners itself.
const DefaultNodeIP = "192.0.2.1"

// ipPool hands out pod IPs from TEST-NET-1 (192.0.2.2 to 192.0.2.254),
// round-robin, so that a released address is reused as late as possible
// (an EndpointSlice may still name the old pod for a moment). Safe for
// concurrent use.
type ipPool struct {
	mu    sync.Mutex
	used  map[netip.Addr]string // address -> pod key
	next  netip.Addr
	first netip.Addr
	last  netip.Addr
}

func newIPPool() *ipPool {
	first := netip.MustParseAddr("192.0.2.2")
	return &ipPool{used: map[netip.Addr]string{}, next: first, first: first, last: netip.MustParseAddr("192.0.2.254")}
}

// errPoolFull is returned when all 253 pod addresses are in use.
var errPoolFull = errors.New("no free pod address in 192.0.2.0/24 (253 pods run)")

// allocate returns a free address for pod key.
func (p *ipPool) allocate(key string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 253 {
		a := p.next
		p.next = a.Next()
		if p.next.Compare(p.last) > 0 {
			p.next = p.first
		}
		if _, taken := p.used[a]; !taken {
			p.used[a] = key
			return a.String(), nil
		}
	}
	return "", errPoolFull
}

// release frees addr (no-op for an unknown address).
func (p *ipPool) release(addr string) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	p.mu.Lock()
	delete(p.used, a)
	p.mu.Unlock()
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 from ports: free, outside
// the kernel's ephemeral range and not handed out before (internal/netport),
// so that nothing takes it before the pod binds it.
func freeLoopbackPort(ports *netport.Picker) (int, error) {
	got, err := ports.Free(1)
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	return got[0], nil
}
