package localenv

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/drillhq/drill/internal/proctree"
)

// tcpListen is the state of a listening socket in /proc/net/tcp{,6}.
const tcpListen = "0A"

// listeners returns the TCP addresses the process tree led by pgid (the
// group and every descendant) listens on, sorted and without duplicates,
// e.g. ["127.0.0.1:8080", "[::]:9090"]. It reads each process's socket
// inodes from /proc/<pid>/fd and matches them with the listening sockets of
// its network namespace in /proc/<pid>/net/tcp and tcp6. Processes that
// vanish meanwhile are skipped; the error says /proc could not be read.
func listeners(pgid int) ([]netip.AddrPort, error) {
	pids, err := proctree.Tree(pgid)
	if err != nil {
		return nil, fmt.Errorf("list the processes of group %d: %w", pgid, err)
	}
	inodes := map[string]bool{}
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(link, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	if len(inodes) == 0 || len(pids) == 0 {
		return nil, nil
	}
	seen := map[netip.AddrPort]bool{}
	var out []netip.AddrPort
	for _, pid := range pids {
		for _, name := range []string{"tcp", "tcp6"} {
			f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "net", name))
			if err != nil {
				continue
			}
			addrs, err := parseListening(bufio.NewScanner(f), inodes)
			_ = f.Close()
			if err != nil {
				return nil, fmt.Errorf("read /proc/%d/net/%s: %w", pid, name, err)
			}
			for _, a := range addrs {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
		// Every process of a replica shares one network namespace as a
		// rule; one readable table is enough.
		if len(out) > 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// parseListening reads a /proc/net/tcp or tcp6 table and returns the local
// addresses of the listening sockets whose inode is in inodes.
func parseListening(sc *bufio.Scanner, inodes map[string]bool) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpListen || !inodes[f[9]] {
			continue
		}
		a, err := parseProcAddr(f[1])
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// parseProcAddr parses a local_address of /proc/net/tcp{,6}: the address
// as 32-bit words in host (little-endian) order, a colon, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q: %w", s, err)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
