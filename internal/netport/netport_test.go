package netport

import (
	"net"
	"strconv"
	"testing"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		in     string
		lo, hi int
		bad    bool
	}{
		{in: "32768\t60999\n", lo: 32768, hi: 60999},
		{in: "1024 65535", lo: 1024, hi: 65535},
		{in: "32768", bad: true},
		{in: "a b", bad: true},
		{in: "60999 32768", bad: true},
		{in: "0 100", bad: true},
		{in: "1024 70000", bad: true},
	}
	for _, c := range cases {
		lo, hi, err := parseRange(c.in)
		if (err != nil) != c.bad || lo != c.lo || hi != c.hi {
			t.Errorf("parseRange(%q) = %d, %d, %v; want %d, %d, error %t", c.in, lo, hi, err, c.lo, c.hi, c.bad)
		}
	}
}

func TestCandidates(t *testing.T) {
	cases := []struct {
		name     string
		elo, ehi int
		lo, hi   int
		ok       bool
	}{
		{name: "linux default: below", elo: 32768, ehi: 60999, lo: 20000, hi: 32767, ok: true},
		{name: "low range: above", elo: 10000, ehi: 40000, lo: 40001, hi: 65535, ok: true},
		{name: "whole range: none", elo: 1024, ehi: 65535},
		{name: "too little either side", elo: 20500, ehi: 64600},
		{name: "unknown", elo: 0, ehi: 0},
	}
	for _, c := range cases {
		lo, hi, ok := candidates(c.elo, c.ehi)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("%s: candidates(%d, %d) = %d, %d, %t; want %d, %d, %t", c.name, c.elo, c.ehi, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}

// TestFree checks the ports are distinct, outside the ephemeral range this
// machine has, and can be listened on once Free returns.
func TestFree(t *testing.T) {
	ports, err := Free(5)
	if err != nil {
		t.Fatal(err)
	}
	elo, ehi := readRange()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		if elo != 0 && p >= elo && p <= ehi {
			t.Errorf("port %d lies in the ephemeral range %d-%d", p, elo, ehi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("listen on returned port %d: %v", p, err)
			continue
		}
		_ = l.Close()
	}
	if _, err := Free(0); err == nil {
		t.Error("Free(0) succeeded, want an error")
	}
}

// TestPickSkipsTakenPorts holds a port and asks pick for ports from a
// span that holds only it (an error) and from one that starts at it (the
// next free one).
func TestPickSkipsTakenPorts(t *testing.T) {
	ports, err := Free(1)
	if err != nil {
		t.Fatal(err)
	}
	p := ports[0]
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, _, err := pick(1, p, p, 0); err == nil {
		t.Errorf("pick from the taken port %d alone = %v, want an error", p, got)
	}
	hi := min(p+50, highest)
	if hi == p {
		return
	}
	got, _, err := pick(1, p, hi, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == p {
		t.Errorf("pick returned the taken port %d", p)
	}
}

// TestPickerNeverRepeats hands out ports one at a time without binding
// them, as replicas not yet started leave them: none comes twice.
func TestPickerNeverRepeats(t *testing.T) {
	pk := NewPicker()
	seen := map[int]bool{}
	for range 200 {
		ports, err := pk.Free(1)
		if err != nil {
			t.Fatal(err)
		}
		if seen[ports[0]] {
			t.Fatalf("port %d handed out twice in %d picks", ports[0], len(seen)+1)
		}
		seen[ports[0]] = true
	}
}
