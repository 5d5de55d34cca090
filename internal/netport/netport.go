// Package netport finds TCP ports on 127.0.0.1 for processes that bind
// them later: a replica of the local runtime, a throwaway PostgreSQL, a
// pod of drill's node agent.
//
// Asking the kernel for port 0 and closing the listener leaves a window
// in which the port is free again, and the kernel hands ports of its
// ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default)
// to every outgoing connection: a database pool's connection opened in
// that window can take the port and hold it for the whole run, so the
// replica that was given it cannot listen and crash-loops. The ports
// returned here lie outside that range, where the kernel never picks a
// port by itself; only a program that names the same port can still take
// it first.
package netport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// rangeFile is where Linux keeps the ephemeral port range.
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Bounds of the ports Free chooses from when the ephemeral range leaves
// room below it: above the ports services are usually configured on,
// below the ephemeral range.
const (
	lowest  = 20000
	highest = 65535
	// minRoom is the fewest candidate ports a side of the ephemeral range
	// must offer to be used.
	minRoom = 1000
)

// Free returns n distinct TCP ports on 127.0.0.1, each free when Free
// returns (it holds a listener on each until all are found, then closes
// them), chosen outside the kernel's ephemeral port range, from a random
// place, so no outgoing connection and no listener on port 0 can take one
// before the caller's process listens on it. Where the range cannot be
// read or leaves no room (fewer than 1,000 ports on either side), the
// ports come from the kernel as port 0 would give them. Callers that hand
// out ports repeatedly use one [Picker], which never repeats a port.
// Errors: n < 1, or not enough free ports.
func Free(n int) ([]int, error) {
	return NewPicker().Free(n)
}

// Picker hands out ports as [Free] does, walking the span outside the
// ephemeral range from a random start so that it never hands out a port
// twice until it has gone round the whole span (12,768 ports below the
// default range): a replica given a port that has not bound it yet can
// never see it handed to the next replica. Safe for concurrent use; the
// zero value is not usable, use [NewPicker].
type Picker struct {
	mu sync.Mutex
	// lo, hi bound the span (inclusive); ok is false when the kernel's
	// port 0 is used instead.
	lo, hi int
	ok     bool
	// next is the offset in the span of the next port to try.
	next int
}

// NewPicker returns a Picker over the span outside this machine's
// ephemeral port range, starting at a random place in it.
func NewPicker() *Picker {
	lo, hi, ok := candidates(readRange())
	p := &Picker{lo: lo, hi: hi, ok: ok}
	if ok {
		p.next = rand.IntN(hi - lo + 1)
	}
	return p
}

// Free returns n distinct free ports on 127.0.0.1 that this Picker has
// not handed out before (until it has gone round its span), as
// [Free] describes. Errors: n < 1, or not enough free ports.
func (p *Picker) Free(n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("free ports: asked for %d, want at least 1", n)
	}
	if !p.ok {
		return kernelPorts(n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ports, tried, err := pick(n, p.lo, p.hi, p.next)
	p.next = (p.next + tried) % (p.hi - p.lo + 1)
	return ports, err
}

// readRange returns the ephemeral port range, or 0, 0 when it cannot be
// read (not Linux, no /proc).
func readRange() (int, int) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, 0
	}
	lo, hi, err := parseRange(string(b))
	if err != nil {
		return 0, 0
	}
	return lo, hi
}

// parseRange reads "32768\t60999\n", the form of ip_local_port_range.
func parseRange(s string) (int, int, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ephemeral port range %q: want two numbers", s)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("ephemeral port range %q: %w", s, err)
	}
	if lo < 1 || hi > highest || lo > hi {
		return 0, 0, fmt.Errorf("ephemeral port range %q: not 1 <= low <= high <= %d", s, highest)
	}
	return lo, hi, nil
}

// candidates returns the inclusive span of ports to choose from given the
// ephemeral range [elo, ehi]: below it when there is room, else above it;
// ok is false when neither side has room (or the range is unknown, 0, 0).
func candidates(elo, ehi int) (lo, hi int, ok bool) {
	if elo == 0 {
		return 0, 0, false
	}
	if elo-1-lowest+1 >= minRoom {
		return lowest, elo - 1, true
	}
	if highest-(ehi+1)+1 >= minRoom {
		return ehi + 1, highest, true
	}
	return 0, 0, false
}

// pick tries the ports of [lo, hi] in turn from lo+start, wrapping, and
// returns the first n it can listen on and how many ports it tried.
func pick(n, lo, hi, start int) ([]int, int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	span := hi - lo + 1
	ports := make([]int, 0, n)
	i := 0
	for ; i < span && len(ports) < n; i++ {
		p := lo + (start+i)%span
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		lns = append(lns, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, i, fmt.Errorf("free ports: found %d of %d free on 127.0.0.1 in %d-%d", len(ports), n, lo, hi)
	}
	return ports, i, nil
}

// kernelPorts returns n distinct ports the kernel chose (port 0), the
// fallback where the ephemeral range leaves no room outside it.
func kernelPorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free ports: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
