package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/netport"
	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/redact"
	"github.com/drillhq/drill/internal/scenario"
)

// ServiceSpec describes a service to run locally.
type ServiceSpec struct {
	// Name is the service name; pods are named <Name>-<i>. Required.
	Name string
	// Command is argv of the program; required.
	Command []string
	// Env is added to drill's own environment for each replica. The
	// runtime sets PortEnv and REPLICA_INDEX per replica, overriding any
	// value here.
	Env map[string]string
	// PortEnv names the environment variable that hands each replica its
	// port; default "PORT" ([scenario.DefaultPortEnv]).
	PortEnv string
	// PortFormat is the form of PortEnv's value: "port" (41234, the
	// default), "host:port" (127.0.0.1:41234) or ":port" (:41234)
	// ([scenario.PortFormats]).
	PortFormat string
	// Dir is the replicas' working directory; default drill's.
	Dir string
	// Replicas is the number of processes; default 1.
	Replicas int
	// Probes are the container's probes; zero fields get Kubernetes defaults.
	Probes scenario.Probes
	// Grace is terminationGracePeriodSeconds; 0 means 30s, and no kill
	// waits less than [MinGrace] (2s), as in the kubelet.
	Grace time.Duration
	// PreStop is the containers' preStop sleep ([ReplicaConfig.PreStop]);
	// 0: none.
	PreStop time.Duration
	// EndpointLag is how long a deleted pod's endpoint stays routed after
	// the deletion, as a cluster's proxies learn of it only after the
	// EndpointSlice controller and their own sync (kube-proxy in iptables
	// mode syncs at most once per second by default), while the kubelet
	// starts the preStop hook and SIGTERM at once: a pod that exits at
	// SIGTERM still receives requests for this long, and a pod that is
	// reaped earlier leaves the Service only then. 0: at once.
	EndpointLag time.Duration
	// Listen is the local Service proxy's address; default 127.0.0.1:0.
	Listen string
	// Balancing is how the Service spreads traffic over ready replicas;
	// the zero value is [PerRequest].
	Balancing Balancing
	// LogDir receives one log file per replica, <LogDir>/<pod>.log (stdout
	// and stderr, appended across restarts). "" means a temporary directory
	// removed by Stop.
	LogDir string
	// Redact, when set, redacts every line written to the pod logs
	// (internal/redact's rules); nil writes the replicas' output as it is.
	Redact *redact.Redactor
	// Placement puts each replica's processes in its own group of the run
	// (drill-<run>/<service>/<pod>: a lower CPU weight than drill's and
	// the service's CPU limit), or at a nice value; nil: where drill runs.
	Placement *placement.Placement
	// Ports hands each pod its port, outside the kernel's ephemeral
	// range and never one it handed out before (internal/netport); share
	// one among the run's Services. nil: a Picker of the Service's own.
	Ports *netport.Picker
	// Listener, when set, starts the Service's listener elsewhere (a
	// stand-in process of its own, internal/standin) on Listen with
	// Balancing; the Service then routes drill's own load with a
	// [NewRouter] and keeps the listener's endpoints equal to the
	// router's. nil: the Service listens in this process ([NewProxy]).
	Listener func(ctx context.Context, service, listen string, balancing Balancing) (Listener, error)
	// Options tune back-off (tests), the log ring and the event source.
	Options Options
}

// Listener is a local Service's listener in another process: the clients
// other than drill's load (a replica calling the Service, an operator's
// curl) reach the replicas through it. Its endpoint changes follow the
// Service's own, in the same order. [Proxy] is one.
type Listener interface {
	// Addr is the listen address (host:port).
	Addr() string
	// SetEndpoint and RemoveEndpoint are [Proxy.SetEndpoint] and
	// [Proxy.RemoveEndpoint].
	SetEndpoint(pod, addr string, order int, ready bool)
	RemoveEndpoint(pod string)
	// Close stops the listener (in-flight requests finish until ctx
	// ends).
	Close(ctx context.Context) error
}

// Service is a running local service: N replicas under the kubelet's probe
// semantics behind a [Proxy]. Safe for concurrent use.
type Service struct {
	spec  ServiceSpec
	log   *slog.Logger
	proxy *Proxy
	// listener serves other clients when it is not proxy (nil: proxy
	// listens itself).
	listener Listener
	tmpDir   string
	// ctx is Start's: the life of every replica, replacements included.
	ctx   context.Context
	clock *event.Clock
	sink  event.Sink
	opt   Options
	// addMu serialises the start of replicas after Start (replacements,
	// a rollout's surge), so that slot generations are unique.
	addMu sync.Mutex

	mu sync.Mutex
	// pods are every replica of the service, in slot order, those being
	// deleted included until their processes are reaped.
	pods []*pod
	// gens is the last generation started in each slot after Start.
	gens  map[int]int
	files []*os.File
	// logs hold the unfinished last line of each redacted pod log.
	logs []*redact.LineWriter
	// deleted holds, per pod being deleted, when its endpoint is due to
	// leave routing (deletion + EndpointLag) and its last status.
	deleted map[string]*deletion
	closing bool          // Stop began: no replica starts any more
	changed chan struct{} // closed and replaced on every replica change

	stopOnce sync.Once
	stopErr  error
	stopped  chan struct{}
}

// Start validates spec, starts the Service proxy and every replica, and
// returns at once (use [Service.WaitReady] to wait for readiness). Errors:
// a bad spec (empty name or command, bad probe fields, negative replicas),
// the listen address taken, or a process that cannot be started; then
// nothing is left running and a temporary log directory is removed.
// Cancelling ctx stops the service as [Service.Stop] does, with the grace
// period.
func Start(ctx context.Context, clock *event.Clock, sink event.Sink, spec ServiceSpec, log *slog.Logger) (svc *Service, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := validateSpec(&spec); err != nil {
		return nil, err
	}
	s := &Service{
		spec:    spec,
		log:     log.With("service", spec.Name),
		changed: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Stop(sctx)
		}
	}()
	if s.spec.Ports == nil {
		s.spec.Ports = netport.NewPicker()
	}
	if s.spec.LogDir == "" {
		d, err := os.MkdirTemp("", "drill-"+spec.Name+"-")
		if err != nil {
			return nil, fmt.Errorf("create log directory for service %s: %w", spec.Name, err)
		}
		s.tmpDir, s.spec.LogDir = d, d
	} else if err := os.MkdirAll(s.spec.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory for service %s: %w", spec.Name, err)
	}
	opt := spec.Options.withDefaults()
	if spec.Listener != nil {
		s.proxy = NewRouter(spec.Name, spec.Balancing, clock, sink, opt.Source, log)
		if s.listener, err = spec.Listener(ctx, spec.Name, spec.Listen, spec.Balancing); err != nil {
			return nil, fmt.Errorf("start the listener of service %s: %w", spec.Name, err)
		}
	} else if s.proxy, err = NewProxy(spec.Name, spec.Listen, spec.Balancing, clock, sink, opt.Source, log); err != nil {
		return nil, err
	}
	s.ctx, s.clock, s.sink, s.opt = ctx, clock, sink, opt
	for i := range spec.Replicas {
		if _, err := s.startPod(i, 0); err != nil {
			return nil, err
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), max(spec.Grace, DefaultGrace)+15*time.Second)
			defer cancel()
			if err := s.Stop(sctx); err != nil {
				s.log.Error("stop service after cancel", "err", err)
			}
		case <-s.stopped:
		}
	}()
	s.log.Debug("service started", "url", s.URL(), "replicas", spec.Replicas, "logDir", s.spec.LogDir)
	return s, nil
}

func validateSpec(spec *ServiceSpec) error {
	if spec.Name == "" {
		return errors.New("service name is empty")
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return fmt.Errorf("service %s: command is empty", spec.Name)
	}
	if spec.Replicas < 0 {
		return fmt.Errorf("service %s: replicas must be >= 0, got %d", spec.Name, spec.Replicas)
	}
	if spec.Replicas == 0 {
		spec.Replicas = 1
	}
	if spec.Grace < 0 {
		return fmt.Errorf("service %s: terminationGracePeriodSeconds must be >= 0, got %s", spec.Name, spec.Grace)
	}
	if spec.PreStop < 0 {
		return fmt.Errorf("service %s: preStop sleep must be >= 0, got %s", spec.Name, spec.PreStop)
	}
	if spec.PortEnv == "" {
		spec.PortEnv = scenario.DefaultPortEnv
	}
	if spec.PortFormat == "" {
		spec.PortFormat = scenario.PortFormatPort
	}
	if spec.PortEnv == scenario.ReplicaIndexEnv || strings.ContainsAny(spec.PortEnv, "= \t\n") {
		return fmt.Errorf("service %s: port variable %q is not usable", spec.Name, spec.PortEnv)
	}
	switch spec.PortFormat {
	case scenario.PortFormatPort, scenario.PortFormatHostPort, scenario.PortFormatColonPort:
	default:
		return fmt.Errorf("service %s: port format %q is not one of %s", spec.Name, spec.PortFormat, strings.Join(scenario.PortFormats, ", "))
	}
	for _, p := range []struct {
		kind  string
		probe *scenario.Probe
	}{
		{event.ProbeStartup, spec.Probes.StartupProbe}, {event.ProbeLiveness, spec.Probes.LivenessProbe},
		{event.ProbeReadiness, spec.Probes.ReadinessProbe},
	} {
		if _, err := newProbeSpec(p.kind, p.probe); err != nil {
			return fmt.Errorf("service %s: %w", spec.Name, err)
		}
	}
	return nil
}

// replicaEnv is the environment of replica index of spec (defaults
// applied): drill's environment, then spec.Env, then the port in
// spec.PortEnv (spec.PortFormat) and the index in REPLICA_INDEX, later
// entries overriding earlier ones.
func replicaEnv(spec ServiceSpec, port, index int) []string {
	out := os.Environ()
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != spec.PortEnv && k != scenario.ReplicaIndexEnv {
			out = append(out, k+"="+spec.Env[k])
		}
	}
	return append(out, spec.PortEnv+"="+PortValue(spec.PortFormat, port),
		scenario.ReplicaIndexEnv+"="+strconv.Itoa(index))
}

// PortValue writes port in format ([scenario.PortFormats]): "41234" for
// port (and for an unknown format), "127.0.0.1:41234" for host:port,
// ":41234" for :port.
func PortValue(format string, port int) string {
	p := strconv.Itoa(port)
	switch format {
	case scenario.PortFormatHostPort:
		return net.JoinHostPort("127.0.0.1", p)
	case scenario.PortFormatColonPort:
		return ":" + p
	}
	return p
}

// pod is one replica of the Service in its slot: slot i is the place of
// replica i of the declared count (its $REPLICA_INDEX and its place in the
// round-robin); gen counts the pods that took the slot, 0 for the first.
type pod struct {
	r    *Replica
	slot int
	gen  int
}

// PodName is the name of the pod of service in slot at generation gen:
// <service>-<slot> for the first, <service>-<slot>-r<gen> for each pod
// that replaced it (a deleted pod's replacement, a rollout's new pod), so
// that events name each process's pod apart.
func PodName(service string, slot, gen int) string {
	if gen == 0 {
		return service + "-" + strconv.Itoa(slot)
	}
	return fmt.Sprintf("%s-%d-r%d", service, slot, gen)
}

// startPod starts a pod in slot at generation gen, on a port of its own,
// and adds it to the Service. It must not be called with s.mu held.
func (s *Service) startPod(slot, gen int) (*pod, error) {
	spec := s.spec
	name := PodName(spec.Name, slot, gen)
	ports, err := spec.Ports.Free(1)
	if err != nil {
		return nil, fmt.Errorf("find a port for pod %s: %w", name, err)
	}
	f, err := os.OpenFile(filepath.Join(spec.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of pod %s: %w", name, err)
	}
	var logs io.Writer = f
	var lw *redact.LineWriter
	if spec.Redact != nil {
		lw = redact.NewLineWriter(f, spec.Redact)
		logs = lw
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = f.Close()
		return nil, fmt.Errorf("start pod %s: service %s is stopping", name, spec.Name)
	}
	s.files = append(s.files, f)
	if lw != nil {
		s.logs = append(s.logs, lw)
	}
	s.mu.Unlock()
	group, err := spec.Placement.Replica(spec.Name, name)
	if err != nil {
		return nil, fmt.Errorf("place pod %s: %w", name, err)
	}
	r, err := NewReplica(ReplicaConfig{
		Service: spec.Name, Pod: name, Container: spec.Name,
		Command: spec.Command, Env: replicaEnv(spec, ports[0], slot), Dir: spec.Dir, Port: ports[0], PortEnv: spec.PortEnv,
		Probes: spec.Probes, Grace: spec.Grace, PreStop: spec.PreStop, Logs: logs, Options: spec.Options,
		Clock: s.clock, Sink: s.sink, Log: s.log, Placement: group,
		OnChange: func(st ReplicaStatus) { s.onChange(slot, st) },
	})
	if err != nil {
		return nil, fmt.Errorf("configure service %s: %w", spec.Name, err)
	}
	if err := r.Start(s.ctx); err != nil {
		return nil, fmt.Errorf("start service %s: %w", spec.Name, err)
	}
	p := &pod{r: r, slot: slot, gen: gen}
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.pods = append(s.pods, p)
		sort.SliceStable(s.pods, func(i, j int) bool { return s.pods[i].slot < s.pods[j].slot })
	}
	s.mu.Unlock()
	if closing {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Stop(sctx)
		return nil, fmt.Errorf("start pod %s: service %s is stopping", name, spec.Name)
	}
	return p, nil
}

// deletion is a pod being deleted, as its Service routes it.
type deletion struct {
	due  time.Time     // when the endpoint leaves routing
	last ReplicaStatus // the pod's last status
	// out is closed once the endpoint was marked terminating at due.
	out chan struct{}
}

// lagDeletion records st of a pod being deleted and reports whether its
// endpoint is still to be routed as before (the EndpointLag has not
// passed). The first call for a pod starts the lag and arranges one more
// onChange when it ends.
func (s *Service) lagDeletion(i int, st ReplicaStatus) bool {
	lag := s.spec.EndpointLag
	if lag <= 0 {
		return false
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deleted[st.Pod]
	if !ok {
		if s.deleted == nil {
			s.deleted = map[string]*deletion{}
		}
		d = &deletion{due: now.Add(lag), out: make(chan struct{})}
		s.deleted[st.Pod] = d
		time.AfterFunc(lag, func() {
			s.mu.Lock()
			last := d.last
			s.mu.Unlock()
			s.onChange(i, last)
			close(d.out)
		})
	}
	d.last = st
	return now.Before(d.due)
}

// waitLag waits until the endpoint of pod, being deleted, has left
// routing at the end of its lag (at once when no lag applies).
func (s *Service) waitLag(pod string) {
	s.mu.Lock()
	d, ok := s.deleted[pod]
	s.mu.Unlock()
	if ok {
		<-d.out
	}
}

func (s *Service) onChange(i int, st ReplicaStatus) {
	if st.Terminating && s.lagDeletion(i, st) {
		return // still routed as before: the proxies have not learnt of it
	}
	if st.Terminating {
		s.proxy.SetEndpointTerminating(st.Pod, st.Address(), i, st.Ready)
		if s.listener != nil {
			s.listener.SetEndpoint(st.Pod, st.Address(), i, false)
		}
	} else {
		s.proxy.SetEndpoint(st.Pod, st.Address(), i, st.Ready)
		if s.listener != nil {
			s.listener.SetEndpoint(st.Pod, st.Address(), i, st.Ready)
		}
	}
	s.mu.Lock()
	s.changedLocked()
	s.mu.Unlock()
}

// changedLocked wakes whoever waits for a change of the Service's pods.
func (s *Service) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// snapshot returns the pods and the channel closed on their next change.
func (s *Service) snapshot() ([]*pod, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pod(nil), s.pods...), s.changed
}

// Done is closed once the service has stopped (Stop returned, or ctx of
// Start was cancelled and the stop finished): every process reaped.
func (s *Service) Done() <-chan struct{} { return s.stopped }

// BalancesPerConnection reports whether the Service balances per
// connection: see [Proxy.BalancesPerConnection].
func (s *Service) BalancesPerConnection() bool { return s.proxy.BalancesPerConnection() }

// DialVia opens a connection as the per-connection Service does, without
// the hop through its listener: see [Proxy.DialVia].
func (s *Service) DialVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error) {
	return s.proxy.DialVia(ctx, dial)
}

// URL is http://127.0.0.1:<port> of the local Service proxy.
func (s *Service) URL() string { return "http://" + s.Addr() }

// Addr is the Service listener's address (host:port), the host of URL.
func (s *Service) Addr() string {
	if s.listener != nil {
		return s.listener.Addr()
	}
	return s.proxy.Addr()
}

// RoundTripVia routes req as the Service does, without the hop through its
// listener: see [Proxy.RoundTripVia].
func (s *Service) RoundTripVia(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	return s.proxy.RoundTripVia(base, req)
}

// Name is the service name.
func (s *Service) Name() string { return s.spec.Name }

// LogDir is the directory holding <pod>.log for every replica.
func (s *Service) LogDir() string { return s.spec.LogDir }

// Status returns every replica's status, in pod order.
// Pods being deleted are listed until their processes are reaped
// ([ReplicaStatus.Terminating]); after a deleted pod's replacement or a
// rollout there may be more entries than declared replicas.
func (s *Service) Status() []ReplicaStatus {
	pods, _ := s.snapshot()
	out := make([]ReplicaStatus, len(pods))
	for i, p := range pods {
		out[i] = p.r.Status()
	}
	return out
}

// Declared is the number of replicas the service was started with
// ([ServiceSpec.Replicas]): the count it keeps, as a ReplicaSet does,
// through deleted pods and rollouts.
func (s *Service) Declared() int { return s.spec.Replicas }

// Logs returns the last log lines kept in memory for pod (nil if there is
// no such pod).
func (s *Service) Logs(pod string) []string {
	pods, _ := s.snapshot()
	for _, p := range pods {
		if p.r.Pod() == pod {
			return p.r.Logs()
		}
	}
	return nil
}

// WaitReady returns nil once at least n replicas are ready. When ctx ends
// first, the service stops, or a replica's probes were refused
// [PortMismatchProbes] times in a row while its processes listen on other
// ports (the error wraps [ErrListensElsewhere] and says where), the error
// names each replica's state and its last log lines.
func (s *Service) WaitReady(ctx context.Context, n int) error {
	if n > s.spec.Replicas {
		return fmt.Errorf("wait for %d ready replicas of service %s: it has only %d", n, s.spec.Name, s.spec.Replicas)
	}
	for {
		_, ch := s.snapshot()
		st := s.Status()
		ready := 0
		var wrong error
		for _, r := range st {
			if r.Ready {
				ready++
			}
			if r.WrongPortProbes >= PortMismatchProbes && wrong == nil {
				wrong = fmt.Errorf("%w: %s", ErrListensElsewhere, r.WrongPort)
			}
		}
		if ready >= n {
			return nil
		}
		if wrong != nil {
			return s.notReady(n, ready, wrong)
		}
		var cause error
		select {
		case <-ch:
			continue
		case <-ctx.Done():
			cause = ctx.Err()
		case <-s.stopped:
			cause = errors.New("service stopped")
		}
		return s.notReady(n, ready, cause)
	}
}

func (s *Service) notReady(want, ready int, cause error) error {
	var b strings.Builder
	pods, _ := s.snapshot()
	for _, p := range pods {
		r := p.r
		st := r.Status()
		fmt.Fprintf(&b, "\n  %s: %s", st.Pod, st.State)
		if st.Reason != "" {
			fmt.Fprintf(&b, " (%s)", st.Reason)
		}
		fmt.Fprintf(&b, ", started=%t ready=%t restarts=%d pid=%d port=%d", st.Started, st.Ready, st.RestartCount, st.PID, st.Port)
		if st.LastProbeFailure != "" {
			fmt.Fprintf(&b, ", last probe failure: %s", st.LastProbeFailure)
		}
		if st.LastTermination != "" {
			fmt.Fprintf(&b, ", last termination: %s", st.LastTermination)
		}
		if st.WrongPort != "" {
			fmt.Fprintf(&b, ", probes refused %d times in a row while it listens elsewhere", st.WrongPortProbes)
		}
		lines := r.Logs()
		if len(lines) > 10 {
			lines = lines[len(lines)-10:]
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "\n    | %s", l)
		}
	}
	return fmt.Errorf("wait for service %s: %d of %d replicas ready, want %d: %w%s", s.spec.Name, ready, len(pods), want, cause, b.String())
}

// Stop stops routing (EndpointRemoved for every replica), closes the proxy,
// and terminates every replica (SIGTERM to its process group, SIGKILL after
// the grace period or at once when ctx ends), returning once every process
// has been reaped. It closes the log files and removes a temporary log
// directory. Safe to call more than once; later calls return the first
// call's result.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.listener != nil {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := s.listener.Close(lctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		if s.proxy != nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := s.proxy.Close(pctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		// No pod starts from here on; a start under way stops its own.
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		// Wait for a start under way to finish, so its pod is stopped too.
		s.addMu.Lock()
		pods, _ := s.snapshot()
		s.addMu.Unlock()
		var wg sync.WaitGroup
		rerrs := make([]error, len(pods))
		for i, p := range pods {
			wg.Go(func() { rerrs[i] = p.r.Stop(ctx) })
		}
		wg.Wait()
		errs = append(errs, rerrs...)
		for _, lw := range s.logs {
			if err := lw.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("write pod log: %w", err))
			}
		}
		for _, f := range s.files {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close log %s: %w", f.Name(), err))
			}
		}
		if s.tmpDir != "" {
			if err := os.RemoveAll(s.tmpDir); err != nil {
				errs = append(errs, fmt.Errorf("remove log directory: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
		if s.stopErr != nil {
			s.stopErr = fmt.Errorf("stop service %s: %w", s.spec.Name, s.stopErr)
		}
		close(s.stopped)
	})
	<-s.stopped
	return s.stopErr
}
