package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/localenv"
)

// ServiceSetup is the setup of a [RoleService] stand-in.
type ServiceSetup struct {
	// Service is the Service's name.
	Service string `json:"service"`
	// Listen is the listen address; "" means 127.0.0.1:0.
	Listen string `json:"listen,omitempty"`
	// Balancing is per request (0) or per connection (1): [localenv.Balancing].
	Balancing localenv.Balancing `json:"balancing"`
}

// ServiceReady is the ready payload of a [RoleService] stand-in.
type ServiceReady struct {
	// Addr is the listen address (host:port).
	Addr string `json:"addr"`
}

// endpointCommand changes one endpoint of a [RoleService] stand-in.
type endpointCommand struct {
	// Op is "set" or "remove".
	Op    string `json:"op"`
	Pod   string `json:"pod"`
	Addr  string `json:"addr,omitempty"`
	Order int    `json:"order,omitempty"`
	Ready bool   `json:"ready,omitempty"`
	// Sent is drill's CLOCK_MONOTONIC reading (ns) when it sent the
	// command; the stand-in's [msgApplied] gives it back.
	Sent int64 `json:"sent"`
}

// msgApplied is the kind of the message a [RoleService] stand-in sends once
// it applied an endpoint command: its Mono is when the listener's routing
// changed, its data the command's Sent.
const msgApplied = "applied"

// serviceCloseTimeout bounds the stand-in's wait for in-flight requests
// when it stops.
const serviceCloseTimeout = 5 * time.Second

// runService serves one Service's listener ([localenv.NewProxy]) until
// ctx ends, applying endpoint commands in order and sending a
// [msgApplied] message for each. Its endpoint events are not sent: the
// Service in drill's process emits them, for the same changes.
func runService(ctx context.Context, setup json.RawMessage, ch *Child) error {
	var s ServiceSetup
	if err := json.Unmarshal(setup, &s); err != nil {
		return fmt.Errorf("decode service setup: %w", err)
	}
	if s.Service == "" {
		return fmt.Errorf("service setup: no service name")
	}
	p, err := localenv.NewProxy(s.Service, s.Listen, s.Balancing, event.NewClock(), nil, "", ch.Log)
	if err != nil {
		return err
	}
	if err := ch.Ready(ServiceReady{Addr: p.Addr()}); err != nil {
		_ = p.Close(context.Background())
		return err
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case line, ok := <-ch.Commands:
			if !ok {
				done = true
				break
			}
			var c endpointCommand
			if err := json.Unmarshal(line, &c); err != nil {
				ch.Log.Warn("bad endpoint command", "line", string(line), "err", err)
				continue
			}
			switch c.Op {
			case "set":
				p.SetEndpoint(c.Pod, c.Addr, c.Order, c.Ready)
			case "remove":
				p.RemoveEndpoint(c.Pod)
			default:
				ch.Log.Warn("unknown endpoint command", "op", c.Op)
				continue
			}
			if err := ch.Send(0, msgApplied, c.Sent); err != nil {
				ch.Log.Warn("report an applied endpoint change", "err", err)
			}
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), serviceCloseTimeout)
	defer cancel()
	return p.Close(cctx)
}

// ServiceListener is a local Service's listener in a [RoleService]
// stand-in: a [localenv.Listener]. Safe for concurrent use.
type ServiceListener struct {
	p    *Process
	addr string
	lag  *followLag
}

// followLag is how closely a listener followed the Service's endpoint
// changes: from drill's send to the stand-in's routing change, both read
// on CLOCK_MONOTONIC.
type followLag struct {
	mu      sync.Mutex
	applied int
	max     time.Duration
}

func (f *followLag) record(m Message) {
	if m.Kind != msgApplied {
		return
	}
	var sent int64
	if json.Unmarshal(m.Data, &sent) != nil || sent == 0 || m.Mono == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied++
	f.max = max(f.max, time.Duration(m.Mono-sent))
}

// Followed is how many endpoint changes the listener applied so far, and
// the longest any took from drill's send to the listener's routing change
// (both read on CLOCK_MONOTONIC, [event.Monotonic]).
func (l *ServiceListener) Followed() (applied int, slowest time.Duration) {
	l.lag.mu.Lock()
	defer l.lag.mu.Unlock()
	return l.lag.applied, l.lag.max
}

var _ localenv.Listener = (*ServiceListener)(nil)

// StartService starts a [RoleService] stand-in for service on listen
// ("" means 127.0.0.1:0). cfg's Role, Setup and Ready are set here.
// Errors: those of [Start] (the address taken is the child's error).
func StartService(ctx context.Context, cfg Config, service, listen string, balancing localenv.Balancing) (*Process, *ServiceListener, error) {
	var ready ServiceReady
	lag := &followLag{}
	cfg.Role, cfg.Setup, cfg.Ready = RoleService, ServiceSetup{Service: service, Listen: listen, Balancing: balancing}, &ready
	cfg.OnMessage = lag.record
	p, err := Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return p, &ServiceListener{p: p, addr: ready.Addr, lag: lag}, nil
}

// Addr implements [localenv.Listener].
func (l *ServiceListener) Addr() string { return l.addr }

// SetEndpoint implements [localenv.Listener]; a failed send (the stand-in
// ended) is logged.
func (l *ServiceListener) SetEndpoint(pod, addr string, order int, ready bool) {
	l.send(endpointCommand{Op: "set", Pod: pod, Addr: addr, Order: order, Ready: ready, Sent: event.Monotonic()})
}

// RemoveEndpoint implements [localenv.Listener].
func (l *ServiceListener) RemoveEndpoint(pod string) {
	l.send(endpointCommand{Op: "remove", Pod: pod, Sent: event.Monotonic()})
}

func (l *ServiceListener) send(c endpointCommand) {
	// After Close the replicas' last changes have nowhere to go; a
	// stand-in that ended on its own was logged when it ended.
	if err := l.p.Send(c); err != nil && !errors.Is(err, ErrExited) {
		l.p.log.Warn("the Service's listener missed an endpoint change", "pod", c.Pod, "err", err)
	}
}

// Close implements [localenv.Listener]: it stops the stand-in and logs
// how closely it followed the Service's endpoint changes.
func (l *ServiceListener) Close(ctx context.Context) error {
	err := l.p.Stop(ctx)
	n, slowest := l.Followed()
	l.p.log.Info("the Service's listener followed its endpoint changes", "changes", n, "slowest", slowest)
	return err
}
