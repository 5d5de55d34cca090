package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drillhq/drill/internal/clock"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/sleep"
)

// DefaultSource is the Source of every event the local runtime emits.
const DefaultSource = "local-runtime"

// DefaultGrace is the Kubernetes default terminationGracePeriodSeconds.
const DefaultGrace = 30 * time.Second

// MinGrace is the kubelet's floor on any kill's grace period
// (kuberuntime minimumGracePeriodInSeconds = 2).
const MinGrace = 2 * time.Second

// Replica states reported in [ReplicaStatus.State].
const (
	StateRunning     = "running"     // the process runs (started or not, ready or not)
	StateTerminating = "terminating" // SIGTERM sent, waiting for the process to exit
	StateWaiting     = "waiting"     // between instances, e.g. Reason CrashLoopBackOff
	StateTerminated  = "terminated"  // stopped for good (Stop or ctx cancelled)
)

// Options tune the local runtime; the zero value gives the kubelet's
// behaviour.
type Options struct {
	// BackoffBase is the first CrashLoopBackOff delay; it doubles per
	// restart up to BackoffMax. Default 10s (the kubelet's); tests use less.
	BackoffBase time.Duration
	// BackoffMax caps the back-off; default 5m. The back-off resets when a
	// container ran for more than 2 x BackoffMax (10 min by default).
	BackoffMax time.Duration
	// LogLines is how many last log lines a replica keeps in memory; default 50.
	LogLines int
	// Source is the Source of emitted events; default "local-runtime".
	Source string

	// clk is the time a replica schedules by: probe times (initial
	// delay, period), restart back-off and the termination grace period,
	// and the start and finish times of its container instances; nil: the
	// machine's clock. Only this package's tests set it, to pin the
	// kubelet's timing rules against exact times. Probe I/O timeouts and
	// the stop safety net are not scheduling and stay on real time.
	clk clock.Clock[time.Time]
}

func (o Options) withDefaults() Options {
	if o.BackoffBase <= 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	o.BackoffMax = max(o.BackoffMax, o.BackoffBase)
	if o.LogLines <= 0 {
		o.LogLines = DefaultLogLines
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if o.clk == nil {
		o.clk = clock.Real(time.Now)
	}
	return o
}

// ReplicaStatus is a snapshot of one replica (a pod with one container).
type ReplicaStatus struct {
	// Pod is the pod name, e.g. order-gateway-0; it survives restarts.
	Pod string `json:"pod"`
	// Port is the replica's TCP port on 127.0.0.1 ($PORT); it survives restarts.
	Port int `json:"port"`
	// PID is the running process's id (also its process group id); 0 when
	// no process runs.
	PID int `json:"pid,omitempty"`
	// State is running, terminating, waiting or terminated.
	State string `json:"state"`
	// Reason qualifies State: CrashLoopBackOff while waiting, the kill
	// reason while terminating.
	Reason string `json:"reason,omitempty"`
	// Started: the startup probe has passed (or there is none).
	Started bool `json:"started"`
	// Ready: the pod's Ready condition.
	Ready bool `json:"ready"`
	// RestartCount is the container's restartCount.
	RestartCount int32 `json:"restartCount"`
	// LastTermination says why the previous instance ended ("" if none did).
	LastTermination string `json:"lastTermination,omitempty"`
	// LastProbeFailure is the latest failed probe, "<probe>: <why>" ("" if
	// none failed yet).
	LastProbeFailure string `json:"lastProbeFailure,omitempty"`
	// StartedAt is when the running process started (zero when none runs);
	// a node agent reports it as state.running.startedAt.
	StartedAt time.Time `json:"startedAt,omitzero"`
	// LastTerminated describes how the previous instance ended, as the
	// kubelet's lastState.terminated (nil if none has ended yet).
	LastTerminated *Termination `json:"lastTerminated,omitempty"`
	// Terminating says the pod is being deleted ([Replica.Delete]): its
	// endpoint leaves the Service as a terminating one (ready=false,
	// serving while its readiness holds, terminating=true) and it is not
	// restarted. It stays true once the pod is gone.
	Terminating bool `json:"terminating,omitempty"`
	// WrongPort says that the replica's probes are refused on its port
	// while its processes listen on other TCP ports, e.g. "replica app-0
	// listens on 127.0.0.1:8080, not on its port 127.0.0.1:41234 given in
	// $PORT; ..." ("" when that is not the case).
	WrongPort string `json:"wrongPort,omitempty"`
	// WrongPortProbes counts the probes in a row that found WrongPort.
	WrongPortProbes int `json:"wrongPortProbes,omitempty"`
	// Finished says the container exited by itself and its restart policy
	// does not restart it (Never; OnFailure after exit code 0): State is
	// terminated and LastTerminated says how it ended. A node agent reports
	// the pod's phase Succeeded (exit code 0) or Failed then.
	Finished bool `json:"finished,omitempty"`
}

// Restart policies of [ReplicaConfig.RestartPolicy], core/v1's
// restartPolicy values.
const (
	RestartAlways    = "Always"
	RestartOnFailure = "OnFailure"
	RestartNever     = "Never"
)

// ErrListensElsewhere is wrapped by the errors that stop waiting for a
// replica whose probes were refused [PortMismatchProbes] times in a row
// while its processes listened on other ports.
var ErrListensElsewhere = errors.New("the replica listens on another port than the one it was given")

// PortMismatchProbes is how many probes in a row must be refused while the
// replica's processes listen on other TCP ports before
// [Service.WaitReady] gives up on it (a program that opens an admin port
// before its main one is not condemned by one early probe).
const PortMismatchProbes = 3

// Termination is how one container instance ended, with the fields of
// core/v1 ContainerStateTerminated.
type Termination struct {
	// ExitCode is the process's exit code; 128+n when killed by signal n
	// (as container runtimes report it).
	ExitCode int32 `json:"exitCode"`
	// Signal is the signal that killed the process (0 if it exited).
	Signal int32 `json:"signal,omitempty"`
	// Reason is Completed (exit code 0), Error (any other end) or
	// StartError (the process could not be started), as the kubelet says.
	Reason string `json:"reason"`
	// Message says why the instance ended (e.g. the failed probe).
	Message string `json:"message,omitempty"`
	// StartedAt and FinishedAt bound the instance's run (StartedAt is zero
	// for a StartError).
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt"`
}

// terminationOf describes inst, which has been reaped, ended for why.
func terminationOf(inst *instance, why string) *Termination {
	t := &Termination{Reason: "Error", Message: why, StartedAt: inst.started, FinishedAt: inst.finished}
	if ps := inst.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Signal = int32(ws.Signal())
			t.ExitCode = 128 + t.Signal
		} else {
			t.ExitCode = int32(ps.ExitCode())
		}
	} else {
		t.ExitCode = -1
	}
	if t.ExitCode == 0 {
		t.Reason = "Completed"
	}
	return t
}

// Address is the replica's host:port on loopback.
func (s ReplicaStatus) Address() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// ReplicaConfig configures a [Replica].
type ReplicaConfig struct {
	// Service names the service the pod belongs to (events' Service field).
	Service string
	// Pod is the pod name; required.
	Pod string
	// Container is the container name; default Service, else Pod.
	Container string
	// Command is argv; required. Resolved with $PATH when it has no slash.
	Command []string
	// Env is the complete environment (KEY=VALUE), $PORT included: the
	// replica adds nothing.
	Env []string
	// Dir is the working directory; default the current one.
	Dir string
	// Port is the TCP port the process listens on (probes go to 127.0.0.1:Port).
	Port int
	// PortEnv names the environment variable in Env that hands the process
	// its port, for messages; default "PORT".
	PortEnv string
	// Probes are the container's probes; zero fields get Kubernetes defaults.
	Probes scenario.Probes
	// Grace is the SIGTERM to SIGKILL grace (terminationGracePeriodSeconds);
	// 0 means the Kubernetes default 30s; like the kubelet, no kill waits
	// less than [MinGrace] (2s).
	Grace time.Duration
	// PreStop is the container's preStop sleep: when the runtime ends the
	// container (a deleted pod, a failed liveness or startup probe) it
	// sleeps this long, within the grace period, before SIGTERM; not when
	// the replica is stopped ([Replica.Stop]). 0: none.
	PreStop time.Duration
	// Logs receives the process's stdout and stderr (nil: discarded, but
	// the last lines are still kept in memory), and drill's own marker
	// lines ("[drill] ... starting container ...").
	Logs io.Writer
	// Output, when set, receives only the process's own stdout and stderr
	// (no marker lines), what a kubelet serves as the container's log.
	// Both streams are written a whole line at a time (a line longer than
	// 64 KiB in pieces), so a line of one never splits a line of the other.
	Output io.Writer
	// RestartPolicy is the pod's restartPolicy: RestartAlways (default,
	// ""), RestartOnFailure (restart after a non-zero exit code) or
	// RestartNever. A container that is not restarted leaves the replica
	// finished ([ReplicaStatus.Finished]).
	RestartPolicy string
	// Options tune back-off, log ring and event source.
	Options Options
	// Clock stamps events; required.
	Clock *event.Clock
	// Sink receives events; nil discards them.
	Sink event.Sink
	// Log is for drill's own diagnostics; nil discards.
	Log *slog.Logger
	// Placement is where the replica's processes run (a cgroup with a CPU
	// weight and quota, or a nice value); nil: where drill runs.
	Placement *placement.Group
	// OnChange is called with the new status after every change of
	// readiness, process or restart count, in order, with the replica's
	// lock held: it must be quick and must not call the Replica's methods.
	OnChange func(ReplicaStatus)
}

// Replica runs one container as local processes with the kubelet's probe
// and restart semantics (docs/DESIGN.md §5):
//
//   - the startup probe gates liveness and readiness; failing
//     failureThreshold times in a row restarts the container;
//   - liveness failing failureThreshold times in a row restarts it
//     (SIGTERM to the process group, SIGKILL after the grace period, the
//     probe's terminationGracePeriodSeconds overriding the container's);
//   - readiness: the container starts unready, needs successThreshold
//     successes in a row to become ready and failureThreshold failures in
//     a row to become unready; with no readiness probe it is ready once
//     started; a container that is not running is unready;
//   - a process that ends (by itself or killed after a failed probe) is
//     restarted as its restartPolicy says: Always (default), OnFailure
//     (after a non-zero exit code) or Never; every restart is subject to
//     the kubelet's CrashLoopBackOff. A container that is not restarted
//     leaves the replica finished.
//
// The probe counters live per replica across restarts, as the kubelet's
// probe workers live per pod. A Replica is safe for concurrent use.
type Replica struct {
	cfg    ReplicaConfig
	opt    Options
	log    *slog.Logger
	probes [3]*probeSpec // startup, liveness, readiness (nil = none)
	prober *prober
	logs   *logSink
	spawn  *spawner

	stopOnce  sync.Once
	stopCh    chan struct{} // closed: stop for good
	forceOnce sync.Once
	force     chan struct{} // closed: SIGKILL now, do not wait for grace
	done      chan struct{} // closed when every process is reaped

	mu         sync.Mutex
	del        *DeleteOptions // set once by Delete, before stopCh closes
	st         ReplicaStatus
	cur        *instance
	thr        [3]thresholds
	bo         backoff
	prevFinish time.Time // exit time of the instance before cur (zero: none)
}

const (
	idxStartup = iota
	idxLiveness
	idxReadiness
)

// instance is one run of the container (one process).
type instance struct {
	cmd       *exec.Cmd
	pid       int
	started   time.Time
	logSeq    uint64
	ctx       context.Context // probes; cancelled when the process is gone
	cancel    context.CancelFunc
	startedCh chan struct{} // closed when the startup probe passed (or none)
	kill      chan termination
	exited    chan struct{} // closed after the process was reaped
	probeWG   sync.WaitGroup

	// Set before exited is closed. exitAt is when the wait saw the
	// process end (real time, before its output was drained); finished
	// is on the replica's clock, after the drain.
	exitAt   time.Time
	finished time.Time
	exitDesc string

	// portNoted: the PortMismatch event of this instance was emitted
	// (under the replica's lock).
	portNoted bool

	// stdout and stderr gather the process's output into whole lines;
	// flushed once the process has been reaped.
	stdout, stderr *lineWriter
}

// termination says why an instance ended.
type termination struct {
	probe  string // "" unless a probe caused it
	reason string
	grace  time.Duration
	// at is the moment the restart is dated by (real time, with its
	// monotonic reading): when the runtime decided to kill (the probe's
	// failureThreshold reached), or when a process that nobody asked to
	// end exited; zero for a stop.
	at time.Time
}

// NewReplica validates cfg and returns a Replica that is not yet running.
// Errors name the bad field (e.g. "livenessProbe.successThreshold: must be 1").
func NewReplica(cfg ReplicaConfig) (*Replica, error) {
	if cfg.Pod == "" {
		return nil, errors.New("pod name is empty")
	}
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, fmt.Errorf("pod %s: command is empty", cfg.Pod)
	}
	if cfg.Clock == nil {
		return nil, fmt.Errorf("pod %s: no clock", cfg.Pod)
	}
	if cfg.Port <= 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("pod %s: port %d out of range", cfg.Pod, cfg.Port)
	}
	if cfg.Container == "" {
		cfg.Container = cfg.Service
		if cfg.Container == "" {
			cfg.Container = cfg.Pod
		}
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.PortEnv == "" {
		cfg.PortEnv = "PORT"
	}
	switch cfg.RestartPolicy {
	case "":
		cfg.RestartPolicy = RestartAlways
	case RestartAlways, RestartOnFailure, RestartNever:
	default:
		return nil, fmt.Errorf("pod %s: restartPolicy %q: want Always, OnFailure or Never", cfg.Pod, cfg.RestartPolicy)
	}
	if cfg.Sink == nil {
		cfg.Sink = event.SinkFunc(func(event.Event) {})
	}
	r := &Replica{
		cfg:    cfg,
		opt:    cfg.Options.withDefaults(),
		prober: newProber(),
		stopCh: make(chan struct{}),
		force:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	r.log = cfg.Log
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("pod", cfg.Pod)
	for i, p := range []struct {
		kind string
		p    *scenario.Probe
	}{
		{event.ProbeStartup, cfg.Probes.StartupProbe},
		{event.ProbeLiveness, cfg.Probes.LivenessProbe},
		{event.ProbeReadiness, cfg.Probes.ReadinessProbe},
	} {
		s, err := newProbeSpec(p.kind, p.p)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", cfg.Pod, err)
		}
		r.probes[i] = s
		if s != nil {
			r.thr[i] = thresholds{success: s.success, failure: s.failure}
		}
	}
	r.bo = backoff{base: r.opt.BackoffBase, max: r.opt.BackoffMax, expire: 2 * r.opt.BackoffMax}
	r.logs = newLogSink(cfg.Logs, cfg.Output, r.opt.LogLines)
	r.st = ReplicaStatus{Pod: cfg.Pod, Port: cfg.Port, State: StateWaiting, Reason: "ContainerCreating"}
	return r, nil
}

// Start starts the first process and returns once it runs (an error if it
// could not be started, e.g. the command does not exist; nothing is left
// running then). The replica then runs until Stop or until ctx is
// cancelled, which stops it like Stop with the full grace period.
func (r *Replica) Start(ctx context.Context) error {
	spawn, err := newSpawner(r.cfg.Placement)
	if err != nil {
		r.stopOnce.Do(func() { close(r.stopCh) })
		close(r.done)
		r.mu.Lock()
		r.st.State = StateTerminated
		r.mu.Unlock()
		return fmt.Errorf("start pod %s: %w", r.cfg.Pod, err)
	}
	r.spawn = spawn
	r.mu.Lock()
	inst, err := r.startLocked(0)
	r.mu.Unlock()
	if err != nil {
		r.spawn.close()
		r.stopOnce.Do(func() { close(r.stopCh) })
		close(r.done)
		r.mu.Lock()
		r.st.State = StateTerminated
		r.mu.Unlock()
		return err
	}
	go r.supervise(inst)
	go func() {
		select {
		case <-ctx.Done():
			r.stopOnce.Do(func() { close(r.stopCh) })
		case <-r.done:
		}
	}()
	return nil
}

// Stop terminates the process (SIGTERM to its process group, SIGKILL after
// the grace period, or at once when ctx ends first) and returns when it has
// been reaped and the replica will not restart. Safe to call more than once
// and concurrently; it returns ctx's error only if ctx ended before the
// processes were reaped after SIGKILL.
func (r *Replica) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() { close(r.stopCh) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
	}
	r.forceOnce.Do(func() { close(r.force) })
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop pod %s: processes not reaped 10s after SIGKILL: %w", r.cfg.Pod, ctx.Err())
	}
}

// DeleteOptions say how [Replica.Delete] ends a pod.
type DeleteOptions struct {
	// Grace is the SIGTERM to SIGKILL grace, the preStop sleep included
	// (a delete's gracePeriodSeconds); 0: the replica's own
	// ([ReplicaConfig.Grace]). No kill waits less than [MinGrace].
	Grace time.Duration
	// PreStop is a preStop sleep run before SIGTERM, within Grace; 0:
	// the replica's own ([ReplicaConfig.PreStop]).
	PreStop time.Duration
	// Kill sends SIGKILL at once instead (no preStop, no grace): a pod
	// whose processes die without warning.
	Kill bool
	// Reason says who deleted the pod, e.g. "fault kill-one"; it goes into
	// the Killing event and the pod's last termination.
	Reason string
	// Fault names the fault that deleted the pod on the Killing event
	// ("" for none).
	Fault string
}

func (o *DeleteOptions) grace(def time.Duration) time.Duration {
	if o.Grace > 0 {
		return o.Grace
	}
	return def
}

// Delete ends the pod for good as the kubelet ends a deleted pod: the
// status turns Terminating at once (its Service takes the endpoint out as
// a terminating one), a Killing event is emitted, the probes go on until
// the process is gone, and the process gets the preStop sleep, SIGTERM
// and SIGKILL after the grace period (or SIGKILL at once with o.Kill). It
// is not restarted. Delete returns at once; [Replica.Done] closes once the
// process has been reaped. A pod already deleted or stopped is left
// alone.
func (r *Replica) Delete(o DeleteOptions) {
	r.mu.Lock()
	if r.del != nil || r.stopping() {
		r.mu.Unlock()
		return
	}
	r.del = &o
	r.st.Terminating = true
	r.st.State, r.st.Reason = StateTerminating, o.Reason
	how := fmt.Sprintf("Stopping container %s", r.cfg.Container)
	if o.Kill {
		how += " (SIGKILL)"
	}
	r.emitLocked(event.Event{Kind: event.K8sEvent, Reason: "Killing", Fault: o.Fault, Detail: how + ": " + o.Reason})
	r.changedLocked()
	r.mu.Unlock()
	r.stopOnce.Do(func() { close(r.stopCh) })
}

// Done is closed once the replica has stopped for good and every process
// it started has been reaped.
func (r *Replica) Done() <-chan struct{} { return r.done }

// Status returns a snapshot of the replica.
func (r *Replica) Status() ReplicaStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Logs returns the last log lines kept in memory (at most
// [Options.LogLines]), oldest first, including drill's own marker lines.
func (r *Replica) Logs() []string { return r.logs.since(0) }

// Pod is the replica's pod name.
func (r *Replica) Pod() string { return r.cfg.Pod }

// emitLocked stamps e with the clock and identity and sends it. Called with
// r.mu held, so a replica's events are emitted in the order of their times,
// but for a ContainerRestart, which is dated by its cause (see restart).
func (r *Replica) emitLocked(e event.Event) { r.emitAtLocked(e, time.Time{}) }

// emitAtLocked emits e dated at (real time with its monotonic reading,
// converted on the run's clock now, so a t=0 moved in between is
// honoured); a zero at dates it now.
func (r *Replica) emitAtLocked(e event.Event, at time.Time) {
	if at.IsZero() {
		e.At = r.cfg.Clock.Now()
	} else {
		e.At = r.cfg.Clock.Offset(at)
	}
	e.Source = r.opt.Source
	e.Service = r.cfg.Service
	e.Pod = r.cfg.Pod
	if e.Container == "" && e.Kind != event.PodReady && e.Kind != event.PodUnready {
		e.Container = r.cfg.Container
	}
	r.cfg.Sink.Emit(e)
}

func (r *Replica) changedLocked() {
	if r.cfg.OnChange != nil {
		r.cfg.OnChange(r.st)
	}
}

// textBusyRetries is how many times startCmd tries again when exec fails
// with ETXTBSY, and textBusyWait the first wait between tries (doubled
// each time: 5+10+20+40 ms at most, 75 ms in all).
const (
	textBusyRetries = 4
	textBusyWait    = 5 * time.Millisecond
)

// startCmd starts the replica's command with its output into stdout and
// stderr. exec fails with ETXTBSY ("text file busy") while any process
// holds the program open for writing; a program written just before the
// run (a build, a test's script) is briefly held so by every child that
// drill or the test forked in the meantime, until that child's own exec
// closes the inherited descriptor (golang/go#22315). Such a failure is
// retried a few times; any other error, or ETXTBSY that lasts, is
// returned (a Cmd cannot be started twice, so each try builds its own).
func (r *Replica) startCmd(stdout, stderr io.Writer) (*exec.Cmd, error) {
	wait := textBusyWait
	for try := 0; ; try++ {
		cmd := exec.Command(r.cfg.Command[0], r.cfg.Command[1:]...)
		cmd.Env = r.cfg.Env
		cmd.Dir = r.cfg.Dir
		cmd.Stdout = stdout
		cmd.Stderr = stderr
		// Output copying must not hang on a descendant that escaped the group.
		cmd.WaitDelay = 2 * time.Second
		err := r.spawn.start(cmd)
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || try == textBusyRetries {
			return cmd, err
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// startLocked starts a new process for restart number count (0: first).
func (r *Replica) startLocked(count int32) (*instance, error) {
	// Two pipes, each gathered into whole lines: a line of stdout and one
	// of stderr written at the same moment never interleave.
	stdout, stderr := &lineWriter{w: r.logs}, &lineWriter{w: r.logs}
	seq := r.logs.mark(fmt.Sprintf("[drill] %s starting container %s (restart %d): %s",
		time.Now().Format(time.RFC3339Nano), r.cfg.Container, count, strings.Join(r.cfg.Command, " ")))
	cmd, err := r.startCmd(stdout, stderr)
	if err != nil {
		return nil, fmt.Errorf("start pod %s: %w", r.cfg.Pod, err)
	}
	inst := &instance{
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		started:   r.opt.clk.Now(),
		logSeq:    seq,
		startedCh: make(chan struct{}),
		kill:      make(chan termination, 1),
		exited:    make(chan struct{}),
		stdout:    stdout,
		stderr:    stderr,
	}
	inst.ctx, inst.cancel = context.WithCancel(context.Background())
	go r.reap(inst)

	r.cur = inst
	r.st.PID = inst.pid
	r.st.State = StateRunning
	r.st.Reason = ""
	r.st.Started = false
	r.st.StartedAt = inst.started
	r.st.RestartCount = count
	r.log.Debug("container started", "pid", inst.pid, "restartCount", count)
	r.emitLocked(event.Event{Kind: event.PodStarted, RestartCount: count, Detail: fmt.Sprintf("pid %d", inst.pid)})
	if r.probes[idxStartup] == nil {
		r.setStartedLocked(inst)
	}
	r.changedLocked()
	for i, p := range r.probes {
		if p == nil {
			continue
		}
		inst.probeWG.Add(1)
		go r.probeLoop(inst, i, p)
	}
	return inst, nil
}

// reap waits for the process to exit, kills whatever is left of its
// process group (a container's processes all die with it), then reaps it.
func (r *Replica) reap(inst *instance) {
	var info unix.Siginfo
	for {
		// WNOWAIT: learn of the exit without reaping, so the process group
		// id cannot be reused before the group is killed.
		err := unix.Waitid(unix.P_PID, inst.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	inst.exitAt = time.Now()
	_ = killGroup(inst.pid, syscall.SIGKILL)
	err := inst.cmd.Wait()
	inst.stdout.flush()
	inst.stderr.flush()
	inst.finished = r.opt.clk.Now()
	inst.exitDesc = describeExit(inst.cmd, err)
	close(inst.exited)
}

func describeExit(cmd *exec.Cmd, err error) string {
	ps := cmd.ProcessState
	if ps == nil {
		return fmt.Sprintf("wait failed: %v", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %s (exit code %d)", unix.SignalName(ws.Signal()), 128+int(ws.Signal()))
	}
	code := ps.ExitCode()
	if code == 0 {
		return "exited with code 0 (Completed)"
	}
	return fmt.Sprintf("exited with code %d (Error)", code)
}

// setStartedLocked records that the startup probe passed (or there is none).
func (r *Replica) setStartedLocked(inst *instance) {
	r.st.Started = true
	close(inst.startedCh)
	if r.probes[idxReadiness] == nil {
		r.setReadyLocked(true, "container started; no readiness probe")
	}
}

func (r *Replica) setReadyLocked(ready bool, why string) {
	if r.st.Ready == ready {
		return
	}
	r.st.Ready = ready
	kind := event.PodUnready
	if ready {
		kind = event.PodReady
	}
	r.emitLocked(event.Event{Kind: kind, Reason: why})
	r.changedLocked()
}

// probeLoop runs one probe of one instance: from initialDelaySeconds after
// the container started (and, for liveness and readiness, once the startup
// probe passed), every periodSeconds, until the instance is gone or the
// probe's result ends its work (startup passed or failed, liveness failed).
func (r *Replica) probeLoop(inst *instance, idx int, spec *probeSpec) {
	defer inst.probeWG.Done()
	ctx := inst.ctx
	clk := r.opt.clk
	newTimer := func(d time.Duration) sleep.Timer { return clk.NewTimer(d) }
	if !sleep.On(ctx, inst.started.Add(spec.initialDelay).Sub(clk.Now()), newTimer) {
		return
	}
	if idx != idxStartup {
		select {
		case <-inst.startedCh: // readiness runs at once then (kubelet's manual trigger)
		case <-ctx.Done():
			return
		}
	}
	t := probeTarget{port: r.cfg.Port, env: r.cfg.Env, dir: r.cfg.Dir}
	tick := clk.NewTicker(spec.period)
	defer tick.Stop()
	for {
		begin := time.Now()
		ok, detail := r.prober.run(ctx, spec, t)
		if ctx.Err() != nil {
			return // the container went away during the probe: no result
		}
		took := time.Since(begin)
		var elsewhere []netip.AddrPort
		if !ok && spec.exec == nil && strings.Contains(detail, "connection refused") {
			elsewhere = r.listensElsewhere(inst)
		}
		if !r.recordProbe(inst, idx, spec, ok, detail, took, elsewhere) {
			return
		}
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		}
	}
}

// recordProbe applies one probe result; it reports whether the probe
// should keep running.
func (r *Replica) recordProbe(inst *instance, idx int, spec *probeSpec, ok bool, detail string, took time.Duration, elsewhere []netip.AddrPort) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != inst || inst.ctx.Err() != nil {
		return false
	}
	r.emitLocked(event.Event{Kind: event.ProbeResult, Probe: spec.kind, OK: ok, Detail: detail, Value: took.Seconds()})
	r.notePortLocked(inst, elsewhere)
	if !ok {
		r.st.LastProbeFailure = spec.kind + ": " + detail
	}
	t := &r.thr[idx]
	if !t.observe(ok) {
		return true
	}
	switch idx {
	case idxStartup:
		n := t.run
		t.hold()
		if ok {
			r.setStartedLocked(inst)
			r.changedLocked()
			return false
		}
		r.requestKillLocked(inst, spec, fmt.Sprintf("startup probe failed %d times: %s", n, detail))
		return false
	case idxLiveness:
		if ok {
			return true
		}
		n := t.run
		t.hold()
		r.requestKillLocked(inst, spec, fmt.Sprintf("liveness probe failed %d times: %s", n, detail))
		return false
	default:
		if ok {
			r.setReadyLocked(true, fmt.Sprintf("readiness probe passed %d times", t.run))
		} else {
			r.setReadyLocked(false, fmt.Sprintf("readiness probe failed %d times: %s", t.run, detail))
		}
		return true
	}
}

// listensElsewhere returns the TCP addresses inst's processes listen on
// when none of them is the replica's port (nil otherwise, or when /proc
// cannot tell).
func (r *Replica) listensElsewhere(inst *instance) []netip.AddrPort {
	addrs, err := listeners(inst.pid)
	if err != nil {
		r.log.Debug("could not read the replica's listening sockets", "err", err)
		return nil
	}
	for _, a := range addrs {
		if int(a.Port()) == r.cfg.Port {
			return nil
		}
	}
	return addrs
}

// notePortLocked records whether the latest probe was refused while the
// processes listen elsewhere: the first time per instance as a
// PortMismatch note event and a warning, and in the status, where
// [Service.WaitReady] finds it.
func (r *Replica) notePortLocked(inst *instance, elsewhere []netip.AddrPort) {
	if len(elsewhere) == 0 {
		r.st.WrongPort, r.st.WrongPortProbes = "", 0
		return
	}
	at := make([]string, len(elsewhere))
	for i, a := range elsewhere {
		at[i] = a.String()
	}
	msg := fmt.Sprintf("replica %s listens on %s, not on its port 127.0.0.1:%d given in $%s; "+
		"set services[].port.env (and port.format) to the variable and form the program reads its listen address from, or make it listen on $%s",
		r.cfg.Pod, strings.Join(at, " and "), r.cfg.Port, r.cfg.PortEnv, r.cfg.PortEnv)
	r.st.WrongPort = msg
	r.st.WrongPortProbes++
	if !inst.portNoted {
		inst.portNoted = true
		r.log.Warn(msg)
		r.emitLocked(event.Event{Kind: event.Note, Reason: "PortMismatch", Detail: msg,
			Address: "127.0.0.1:" + strconv.Itoa(r.cfg.Port)})
	}
	if r.st.WrongPortProbes == PortMismatchProbes {
		r.changedLocked()
	}
}

func (r *Replica) requestKillLocked(inst *instance, spec *probeSpec, reason string) {
	grace := r.cfg.Grace
	if spec.grace != nil {
		grace = *spec.grace
	}
	select {
	case inst.kill <- termination{probe: spec.kind, reason: reason, grace: grace, at: time.Now()}:
	default: // a kill is already under way
	}
}

// supervise owns the replica's processes: it waits for each instance to
// end, restarts it with back-off, and on stop terminates and reaps it.
func (r *Replica) supervise(inst *instance) {
	defer close(r.done)
	defer r.spawn.close()
	for {
		cause, stopping := r.await(inst)
		<-inst.exited
		finished := !stopping && !r.restarts(inst)
		r.ended(inst, cause, stopping || finished, finished)
		if stopping || finished {
			return
		}
		var ok bool
		inst, ok = r.restart(inst, cause)
		if !ok {
			return
		}
	}
}

// await waits for inst to end: by itself, by a probe-caused kill, or by stop.
func (r *Replica) await(inst *instance) (termination, bool) {
	select {
	case <-inst.exited:
		return termination{reason: "container " + inst.exitDesc, at: inst.exitAt}, r.stopping()
	case k := <-inst.kill:
		r.mu.Lock()
		if r.cur == inst {
			r.st.State, r.st.Reason = StateTerminating, k.reason
			r.emitAtLocked(event.Event{Kind: event.K8sEvent, Probe: k.probe, Reason: "Killing",
				Detail: fmt.Sprintf("Container %s failed %s probe, will be restarted: %s", r.cfg.Container, k.probe, k.reason)}, k.at)
			r.changedLocked()
		}
		r.mu.Unlock()
		r.terminate(inst, k.grace, r.cfg.PreStop)
		return k, r.stopping()
	case <-r.stopCh:
		r.mu.Lock()
		del := r.del
		if del == nil {
			r.st.State, r.st.Reason = StateTerminating, "stopping"
			r.changedLocked()
		}
		r.mu.Unlock()
		if del == nil {
			r.terminate(inst, r.cfg.Grace, 0)
			return termination{reason: "stopped by drill"}, true
		}
		if del.Kill {
			_ = killGroup(inst.pid, syscall.SIGKILL)
			<-inst.exited
		} else {
			preStop := del.PreStop
			if preStop == 0 {
				preStop = r.cfg.PreStop
			}
			r.terminate(inst, del.grace(r.cfg.Grace), preStop)
		}
		return termination{reason: "deleted: " + del.Reason}, true
	}
}

func (r *Replica) stopping() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

// terminate runs the preStop sleep (within grace), then sends SIGTERM to
// the process group, then SIGKILL once grace is over (at least [MinGrace]
// after SIGTERM, as the kubelet grants after a preStop hook) or at once on
// force, and waits until the process is reaped.
func (r *Replica) terminate(inst *instance, grace, preStop time.Duration) {
	select {
	case <-inst.exited:
		return
	default:
	}
	grace = max(grace, MinGrace)
	if preStop > 0 {
		slept := min(preStop, grace)
		t := r.opt.clk.NewTimer(slept)
		select {
		case <-inst.exited:
			t.Stop()
			return
		case <-t.C():
		case <-r.force:
		}
		t.Stop()
		grace = max(grace-slept, MinGrace)
	}
	{
		_ = killGroup(inst.pid, syscall.SIGTERM)
		t := r.opt.clk.NewTimer(grace)
		defer t.Stop()
		select {
		case <-inst.exited:
			return
		case <-t.C():
			r.log.Debug("grace period over; sending SIGKILL", "pid", inst.pid, "grace", grace)
		case <-r.force:
		}
	}
	_ = killGroup(inst.pid, syscall.SIGKILL)
	<-inst.exited
}

// restarts says whether the restart policy restarts inst, which has been
// reaped.
func (r *Replica) restarts(inst *instance) bool {
	switch r.cfg.RestartPolicy {
	case RestartNever:
		return false
	case RestartOnFailure:
		ps := inst.cmd.ProcessState
		return ps == nil || !ps.Success()
	}
	return true
}

// ended records that inst's process is gone (and reaped); stopping: the
// replica ends with it (stopped, or finished: not restarted by its
// policy).
func (r *Replica) ended(inst *instance, cause termination, stopping, finished bool) {
	<-inst.exited
	inst.cancel()
	inst.probeWG.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.PID = 0
	r.st.Started = false
	r.st.StartedAt = time.Time{}
	r.st.LastTermination = cause.reason
	r.st.LastTerminated = terminationOf(inst, cause.reason)
	if stopping {
		r.st.State, r.st.Reason = StateTerminated, ""
		r.st.Finished = finished
	} else {
		r.st.State, r.st.Reason = StateWaiting, ""
	}
	if r.st.Ready {
		r.setReadyLocked(false, "container terminated: "+cause.reason)
	} else {
		r.changedLocked()
	}
	r.log.Debug("container ended", "pid", inst.pid, "reason", cause.reason, "exit", inst.exitDesc)
}

// restart starts the next instance after the kubelet's back-off. It returns
// false if the replica was stopped meanwhile.
func (r *Replica) restart(prev *instance, cause termination) (*instance, bool) {
	// The reference the kubelet checks the back-off against: see [backoff].
	ref := prev.finished
	if cause.probe != "" {
		ref = r.prevFinish
	}
	logs := r.logs.since(prev.logSeq)
	for {
		if r.stopping() {
			r.mu.Lock()
			r.st.State, r.st.Reason = StateTerminated, ""
			r.changedLocked()
			r.mu.Unlock()
			return nil, false
		}
		r.mu.Lock()
		wait := r.bo.wait(r.opt.clk.Now(), ref)
		if wait > 0 {
			r.st.State, r.st.Reason = StateWaiting, "CrashLoopBackOff"
			r.emitLocked(event.Event{Kind: event.K8sEvent, Reason: "BackOff",
				Detail: fmt.Sprintf("Back-off %s restarting failed container %s in pod %s", r.bo.current(), r.cfg.Container, r.cfg.Pod)})
			r.changedLocked()
		}
		r.mu.Unlock()
		if wait > 0 && !sleepStop(r.stopCh, r.opt.clk, wait) {
			r.mu.Lock()
			r.st.State, r.st.Reason = StateTerminated, ""
			r.changedLocked()
			r.mu.Unlock()
			return nil, false
		}
		r.mu.Lock()
		r.bo.next(r.opt.clk.Now(), ref)
		r.prevFinish = prev.finished
		count := r.st.RestartCount + 1
		// Dated by its cause, not by the new process (PodStarted, just
		// below): a kill by when it was decided, however long the old
		// process took to shut down; a crash by its exit, however long
		// the back-off held the next start.
		r.emitAtLocked(event.Event{Kind: event.ContainerRestart, RestartCount: count, Probe: cause.probe,
			Reason: cause.reason, Logs: logs}, cause.at)
		inst, err := r.startLocked(count)
		if err == nil {
			r.mu.Unlock()
			return inst, true
		}
		// Could not start (e.g. the binary vanished): the kubelet counts a
		// failed start as a run that ended at once, backs off, and says so
		// in a Failed event.
		r.emitLocked(event.Event{Kind: event.K8sEvent, Reason: "Failed", RestartCount: count,
			Detail: fmt.Sprintf("Error: failed to start container %s: %v", r.cfg.Container, err)})
		r.st.RestartCount = count
		r.st.LastTermination = err.Error()
		now := r.opt.clk.Now()
		r.st.LastTerminated = &Termination{ExitCode: 128, Reason: "StartError", Message: err.Error(), FinishedAt: now}
		r.st.State, r.st.Reason = StateWaiting, "StartError"
		r.changedLocked()
		r.mu.Unlock()
		prev = &instance{finished: now, logSeq: r.logs.mark("[drill] " + err.Error())}
		cause = termination{reason: "StartError: " + err.Error(), at: time.Now()}
		ref = now
		logs = []string{err.Error()}
	}
}

// sleepStop sleeps for d on clk; false if stop was closed first.
func sleepStop(stop <-chan struct{}, clk clock.Clock[time.Time], d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-stop:
		return false
	}
}

// killGroup signals the process group led by pid. It refuses pid <= 1:
// kill(0) or kill(-1) would signal drill's own group or every process.
func killGroup(pid int, sig syscall.Signal) error {
	if pid <= 1 {
		return syscall.ESRCH
	}
	return syscall.Kill(-pid, sig)
}
