package inject

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/drillhq/drill/internal/scenario"
)

// EnsureProxy makes the scenario's proxy p exist on tp and returns it with
// its resolved listen address.
//
// If no proxy of that name exists it is created (listen "" means
// 127.0.0.1:0), journaled as proxy-created BEFORE the call, and its deletion
// is pushed on stack (so it is removed on every exit path; `drill cleanup`
// deletes it after a SIGKILL). If one exists (a remote Toxiproxy deployed in
// staging), it is adopted when p.Upstream is empty or equal to its own and
// p.Listen is empty, has port 0 (the scenario default 127.0.0.1:0 means "any
// address") or equals its own; it is left in place at the end. Otherwise the
// error says what differs. An adopted proxy that is disabled is an error (another run may
// have left it down; run drill cleanup). stack and j may be nil.
func EnsureProxy(ctx context.Context, tp Toxiproxy, runID string, p scenario.Proxy, j *Journal, stack *Stack) (ProxyInfo, error) {
	if err := validName(p.Name); err != nil {
		return ProxyInfo{}, fmt.Errorf("proxy name: %w", err)
	}
	existing, err := tp.Proxy(ctx, p.Name)
	switch {
	case err == nil:
		if p.Upstream != "" && p.Upstream != existing.Upstream {
			return ProxyInfo{}, fmt.Errorf("proxy %s exists at %s with upstream %s, the scenario says %s",
				p.Name, tp.APIURL(), existing.Upstream, p.Upstream)
		}
		if !anyListen(p.Listen) && p.Listen != existing.Listen {
			return ProxyInfo{}, fmt.Errorf("proxy %s exists at %s listening on %s, the scenario says %s",
				p.Name, tp.APIURL(), existing.Listen, p.Listen)
		}
		if !existing.Enabled {
			return ProxyInfo{}, fmt.Errorf("proxy %s at %s is disabled; run %s", p.Name, tp.APIURL(),
				CleanupCommand("<id>", tp.APIURL())+" (or enable it)")
		}
		return existing, nil
	case !errors.Is(err, ErrProxyNotFound):
		return ProxyInfo{}, err
	}
	if p.Upstream == "" {
		return ProxyInfo{}, fmt.Errorf("proxy %s: upstream required to create it", p.Name)
	}
	e := Entry{Op: OpApply, Key: KindProxyCreated + "/" + p.Name, Kind: KindProxyCreated,
		Toxiproxy: tp.APIURL(), Embedded: isEmbedded(tp), Proxy: p.Name, Run: runID}
	if err := j.Record(e); err != nil {
		return ProxyInfo{}, fmt.Errorf("journal proxy %s: %w", p.Name, err)
	}
	info, err := tp.CreateProxy(ctx, p.Name, p.Listen, p.Upstream)
	del := func(ctx context.Context) error {
		if err := tp.DeleteProxy(ctx, p.Name); err != nil && !errors.Is(err, ErrProxyNotFound) {
			return err
		}
		e.Op = OpRevert
		return j.Record(e)
	}
	if err != nil {
		if errors.Is(err, ErrProxyExists) { // created meanwhile by someone else: not ours
			e.Op = OpRevert
			return ProxyInfo{}, errors.Join(err, j.Record(e))
		}
		// It may exist if the call timed out after the server acted.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRevertTimeout)
		defer cancel()
		if derr := del(rctx); derr != nil {
			err = errors.Join(err, derr)
		}
		return ProxyInfo{}, err
	}
	if stack != nil {
		stack.Push("proxy "+p.Name, del)
	}
	return info, nil
}

// anyListen reports whether listen leaves the address to the server: empty,
// or port 0 (e.g. the scenario default 127.0.0.1:0). An existing proxy
// matches such a listen whatever its own address.
func anyListen(listen string) bool {
	if listen == "" {
		return true
	}
	_, port, err := net.SplitHostPort(listen)
	return err == nil && (port == "0" || port == "")
}
