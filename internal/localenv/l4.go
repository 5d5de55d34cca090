package localenv

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Balancing says how a local Service spreads traffic over its ready
// endpoints.
type Balancing int

const (
	// PerRequest balances every HTTP request on its own (an L7 proxy, as
	// an ingress, a cloud load balancer in IP mode or a mesh sidecar
	// does): a replica that goes unready gets no further request, even
	// on a client's kept-alive connection. The default.
	PerRequest Balancing = iota
	// PerConnection balances each TCP connection when it is opened and
	// leaves it with its endpoint for its life, as kube-proxy does: a
	// kept-alive connection keeps reaching its replica after the replica
	// went unready or left the EndpointSlice, until one side closes it;
	// with no ready endpoint a new connection is refused.
	PerConnection
)

// errNoEndpoints is the dial error of a per-connection Service with no
// ready endpoint: the connection refused that kube-proxy's REJECT rule
// gives a client.
func (p *Proxy) errNoEndpoints() error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: p.ln.Addr(),
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// BalancesPerConnection reports whether the Service balances per
// connection ([PerConnection]); callers that route in process then open
// their connections with [Proxy.DialVia] instead of calling
// [Proxy.RoundTripVia].
func (p *Proxy) BalancesPerConnection() bool { return p.balancing == PerConnection }

// DialVia opens a connection the way the per-connection Service's
// listener does, in the caller's process: it picks the next ready
// endpoint round-robin and dials its address with dial, so every request
// the caller sends on that connection reaches that endpoint, however its
// readiness changes later. With no ready endpoint it fails as a refused
// connection (the error text holds "connection refused"). Safe for
// concurrent use.
func (p *Proxy) DialVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	e, ok := p.pick()
	if !ok {
		return nil, p.errNoEndpoints()
	}
	return dial(ctx, "tcp", e.addr)
}

// pick returns the next ready endpoint round-robin; false when none is.
func (p *Proxy) pick() (*endpoint, bool) {
	eps := *p.ready.Load()
	if len(eps) == 0 {
		return nil, false
	}
	return eps[(p.rr.Add(1)-1)%uint64(len(eps))], true
}

// serveL4 accepts connections until the listener closes and relays each
// to one ready endpoint (see [PerConnection]). A connection accepted when
// no endpoint is ready, or whose endpoint cannot be reached, is reset.
func (p *Proxy) serveL4() {
	defer close(p.served)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Error("service listener stopped", "err", err)
			}
			return
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.relay(c)
		}()
	}
}

// closeGrace is how long Close gives a per-connection Service's relayed
// connections to end on their own before it closes them: clients keep
// idle connections open (an L4 relay cannot tell idle from busy), so
// waiting for all of them would wait for the clients' idle timeouts.
const closeGrace = 2 * time.Second

// closeL4 stops accepting and waits for the relayed connections to end,
// at most closeGrace or until ctx ends, then closes the rest (a client's
// idle kept-alive connection, or a request cut at teardown).
func (p *Proxy) closeL4(ctx context.Context) error {
	_ = p.ln.Close()
	<-p.served // no connection is accepted (and counted) after this
	done := make(chan struct{})
	go func() { p.conns.Wait(); close(done) }()
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
	case <-ctx.Done():
	}
	p.cancel()
	<-done
	return nil
}

// relay carries one client connection to an endpoint and back until both
// directions end (each side's close is passed on as a half-close) or the
// proxy closes.
func (p *Proxy) relay(c net.Conn) {
	e, ok := p.pick()
	if !ok {
		reset(c)
		return
	}
	ctx, cancel := context.WithTimeout(p.baseCtx, 5*time.Second)
	b, err := (&net.Dialer{KeepAlive: -1}).DialContext(ctx, "tcp", e.addr)
	cancel()
	if err != nil {
		p.log.Debug("endpoint unreachable; connection reset", "pod", e.pod, "err", err)
		reset(c)
		return
	}
	stop := context.AfterFunc(p.baseCtx, func() { _ = c.Close(); _ = b.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // splice(2) between two TCP sockets on Linux
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
	_ = c.Close()
	_ = b.Close()
}

// reset closes c with a TCP RST (linger 0) instead of a FIN, so the
// client sees a connection reset rather than an empty answer.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
