// Package record defines the run record, drill's run.json: everything a
// run produced, in a versioned schema, enough to re-judge the run later
// (`drill report run.json`) and to compare runs (docs/DESIGN.md §12).
//
// The schema is identified by [SchemaVersion]. Offsets (event times,
// windows, bucket starts) are nanoseconds on the run's monotonic clock
// (t=0 when load started); wall-clock times are for display only.
// [Save] redacts secrets (internal/redact's rules) before anything is
// written.
//
// run.json embeds every stream's per-second series ("series"), as it
// always has: a record is self-contained, and older ones read the same.
// While a run goes, its seconds and events are appended to the journal
// beside it ([JournalFile], written by [StartJournal] and
// [JournalEvents]), which is what the run reads back to judge and what
// [Recover] rebuilds a killed run's record from.
package record

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drillhq/drill/internal/assert"
	"github.com/drillhq/drill/internal/cpuuse"
	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/findings"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/plan"
	"github.com/drillhq/drill/internal/scenario"
)

// SchemaVersion names this run.json schema. [Load] refuses any other.
const SchemaVersion = "drill.dev/run/v1"

// Exit codes of docs/DESIGN.md §11, named for run records; the numbers are
// internal/exitcode's, the single source of truth.
const (
	ExitPass          = exitcode.OK                 // every assertion passed, the run was valid and clean
	ExitFail          = exitcode.AssertionFailed    // an assertion failed
	ExitBadInput      = exitcode.BadInput           // bad input or usage (nothing was touched)
	ExitCouldNotRun   = exitcode.CouldNotRun        // environment failure, stop condition abort or signal
	ExitInvalid       = exitcode.InvalidMeasurement // load generator behind schedule, fault not on path, or no verdict possible
	ExitCleanupFailed = exitcode.CleanupUnverified  // cleanup could not be verified: a fault may still be active
)

// Run is one drill run as recorded in run.json.
type Run struct {
	// SchemaVersion is always [SchemaVersion] when written by this drill.
	SchemaVersion string `json:"schemaVersion"`
	// RunID identifies the run; it is carried by the run's toxics.
	RunID string `json:"runId"`
	// Scenario is the scenario as parsed and defaulted (its assertions are
	// what `drill report` re-judges).
	Scenario *scenario.Scenario `json:"scenario"`
	// ScenarioFile is the path the scenario was read from.
	ScenarioFile string `json:"scenarioFile,omitempty"`
	// ScenarioDigest identifies what the drill did, for comparing runs:
	// "sha256:" and the hex SHA-256 of the canonical scenario (see
	// [ScenarioDigest]). Set when the record is first written; empty in
	// records written before it existed (those compare by scenario name).
	ScenarioDigest string `json:"scenarioDigest,omitempty"`
	// Plan is the timeline the run carried out (windows for judging).
	Plan *plan.Plan `json:"plan"`
	// StartedAt is the wall-clock time of t=0 (display only).
	StartedAt time.Time `json:"startedAt"`
	// EndedAt is the wall-clock time the run ended (display only).
	EndedAt time.Time `json:"endedAt,omitempty"`
	// Events is the run's event log sorted by At.
	Events []event.Event `json:"events"`
	// Series holds each load stream's per-second buckets, by stream name.
	Series map[string]*measure.Series `json:"series"`
	// Results are the judged assertions, in scenario order.
	Results []assert.Result `json:"results"`
	// FindingsSchema names the shape of Findings ([findings.SchemaVersion]);
	// empty in records written before findings existed.
	FindingsSchema string `json:"findingsSchema,omitempty"`
	// Findings say what happened in the run, asked or not
	// (docs/DESIGN.md §10): detection, routing lag, unroutable intervals, shedding,
	// recovery, restarts and errors by phase, each with a severity. They
	// never change ExitCode.
	Findings []findings.Finding `json:"findings,omitempty"`
	// Validity says whether the measurement can be trusted.
	Validity Validity `json:"validity"`
	// Cleanup says whether every injected fault was verifiably removed.
	Cleanup Cleanup `json:"cleanup"`
	// Recovered is true when drill report rebuilt this record from the
	// journal of a run that ended without writing run.json ([Recover]):
	// the run was cut short and never verified its cleanup.
	Recovered bool `json:"recovered,omitempty"`
	// Aborted is why the run could not be carried out to its end (stop
	// condition with action abort, signal, environment failure); empty
	// when it ran to the end.
	Aborted string `json:"aborted,omitempty"`
	// ExitCode is the code the run exited with (docs/DESIGN.md §11).
	ExitCode int `json:"exitCode"`
	// Error is the message the run ended with (empty on exit 0).
	Error string `json:"error,omitempty"`
	// Environment describes where the run happened.
	Environment Environment `json:"environment"`
	// CPU says where the machine's CPU went while load ran: each part's
	// CPU seconds and share (drill, each service's replicas, each
	// dependency), the machine's busy share and its cores, per second;
	// nil when it was not measured (no /proc, or a record written before).
	CPU *cpuuse.Usage `json:"cpu,omitempty"`
	// LoadWorkers is each load worker's account of its share, by index,
	// when the scenario's load ran on worker pods (load.workers); empty
	// when the load ran in drill's process.
	LoadWorkers []LoadWorker `json:"loadWorkers,omitempty"`
	// Secrets are values the run knows to be secret beyond those written
	// in its scenario (values read with ${env.NAME}); never written, used
	// by [Redact] wherever they appear.
	Secrets []string `json:"-"`
}

// Validity records the checks that decide whether a run's measurement can
// be trusted (exit code 4 when not).
type Validity struct {
	// LoadBehind lists streams whose generator fell behind its schedule
	// beyond the stream's lag budget.
	LoadBehind []StreamLag `json:"loadBehind,omitempty"`
	// ConnectionErrors lists streams whose share of connection-level
	// errors passed their bound (maxConnectionErrors).
	ConnectionErrors []StreamConnErrors `json:"connectionErrors,omitempty"`
	// Problems are other reasons the measurement is invalid (the run
	// journal could not keep every measured second).
	Problems []string `json:"problems,omitempty"`
	// Warnings are worth reading but do not invalidate the run.
	Warnings []string `json:"warnings,omitempty"`
}

// Valid reports whether no check invalidated the measurement.
func (v Validity) Valid() bool {
	return len(v.LoadBehind) == 0 && len(v.ConnectionErrors) == 0 && len(v.Problems) == 0
}

// StreamConnErrors says how many of a stream's requests failed at
// connection level (measure.ConnectionLevel) in the run window.
type StreamConnErrors struct {
	Stream string `json:"stream"`
	// Errors counts connection-level failures; Requests all completed
	// requests; ByKind the failures per error kind.
	Errors   int64            `json:"errors"`
	Requests int64            `json:"requests"`
	ByKind   map[string]int64 `json:"byKind,omitempty"`
	// Fraction is Errors/Requests (0..1); Bound the stream's
	// maxConnectionErrors.
	Fraction float64 `json:"fraction"`
	Bound    float64 `json:"bound"`
}

// StreamLag says how far a stream's generator fell behind its schedule
// (measure's lag rule, [CheckLag]).
type StreamLag struct {
	Stream string `json:"stream"`
	// Late counts requests sent later than LateAfter; Requests all sent.
	Late     int64 `json:"late"`
	Requests int64 `json:"requests"`
	// Missed counts requests the schedule intended and the generator never
	// sent, Intended all the schedule intended; both are 0 when every
	// intended request went out (and in records written before they were
	// kept).
	Missed   int64 `json:"missed,omitempty"`
	Intended int64 `json:"intended,omitempty"`
	// Fraction is (Late+Missed)/max(Intended, Requests) (0..1); Budget the
	// allowed fraction.
	Fraction float64 `json:"fraction"`
	Budget   float64 `json:"budget"`
	// LateAfter is the lag beyond which a request counts as late.
	LateAfter time.Duration `json:"lateAfter"`
	// LagP99 is the stream's dispatch lag p99 over the judged span (ns).
	LagP99 time.Duration `json:"lagP99,omitempty"`
	// WorstAt is the start (ns offset) of the second with the most late
	// requests (by intended send time), WorstLate their number; 0 in
	// records written before they were kept.
	WorstAt   time.Duration `json:"worstAt,omitempty"`
	WorstLate int64         `json:"worstLate,omitempty"`
}

// Cleanup records the removal of everything the run injected or started.
type Cleanup struct {
	// Verified is true when every fault was removed and the removal was
	// checked (the proxies list no toxic of this run). The zero value is
	// false: a run that never recorded its cleanup is not clean.
	Verified bool `json:"verified"`
	// Leftovers are what may still be active, each with how to remove it.
	Leftovers []Leftover `json:"leftovers,omitempty"`
	// Command removes every leftover of the run at once (e.g. "drill
	// cleanup --run-id ..."); empty when there is nothing to remove.
	Command string `json:"command,omitempty"`
}

// Leftover is something the run could not verifiably remove.
type Leftover struct {
	// Kind is toxic, proxy, process, container, temp-dir, ...
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
	// Remove says how to remove it by hand (e.g. a drill cleanup or curl command).
	Remove string `json:"remove,omitempty"`
}

// Environment describes where a run happened.
type Environment struct {
	// Type is local or kubernetes.
	Type string `json:"type,omitempty"`
	// DrillVersion is the drill build that ran.
	DrillVersion string `json:"drillVersion,omitempty"`
	// GoVersion, OS and Arch describe the harness binary.
	GoVersion string `json:"goVersion,omitempty"`
	OS        string `json:"os,omitempty"`
	Arch      string `json:"arch,omitempty"`
	CPUs      int    `json:"cpus,omitempty"`
	Hostname  string `json:"hostname,omitempty"`
	// KubeContext and Namespace are set for kubernetes runs.
	KubeContext string `json:"kubeContext,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	// ToxiproxyURL is the remote Toxiproxy API; empty when embedded.
	ToxiproxyURL string `json:"toxiproxyURL,omitempty"`
	// Nodes are the Kubernetes nodes that ran the target services' pods
	// when the run started (kubernetes runs), in name order: which kubelet
	// and container runtime, or drill's node agent, ran the system under
	// test. Empty for local runs and when no target pod was scheduled.
	Nodes []Node `json:"nodes,omitempty"`
	// Notes are free key/value facts (e.g. postgres mode, versions).
	Notes map[string]string `json:"notes,omitempty"`
	// Priority says how a local run shared the CPU between drill and the
	// system under test (nil for kubernetes runs and older records).
	Priority *Priority `json:"priority,omitempty"`
}

// Node is one Kubernetes node of a kubernetes run, from its
// status.nodeInfo.
type Node struct {
	// Name is the Node's name.
	Name string `json:"name"`
	// Kind is NodeKubelet or NodeAgent.
	Kind string `json:"kind"`
	// KubeletVersion and ContainerRuntime are status.nodeInfo's
	// kubeletVersion and containerRuntimeVersion (e.g. "v1.37.2",
	// "containerd://1.6.20~ds1"; the agent's "drill-agent",
	// "drill://local-processes").
	KubeletVersion   string `json:"kubeletVersion,omitempty"`
	ContainerRuntime string `json:"containerRuntime,omitempty"`
	// OSImage and KernelVersion are status.nodeInfo's.
	OSImage       string `json:"osImage,omitempty"`
	KernelVersion string `json:"kernelVersion,omitempty"`
	// Pods is how many of the target services' pods it ran.
	Pods int `json:"pods"`
	// Error says why the Node could not be read (its name came from a
	// pod's spec.nodeName); the other fields are then empty.
	Error string `json:"error,omitempty"`
}

// Kinds of [Node].
const (
	// NodeKubelet is a node run by a kubelet.
	NodeKubelet = "kubelet"
	// NodeAgent is a node run by `drill agent`, drill's stand-in for the
	// kubelet (processes on the agent's machine, not containers).
	NodeAgent = "drill agent"
)

// Line describes n in one line, e.g. "drill-node: kubelet v1.37.2,
// containerd://1.6.20~ds1 (3 pods)" or "drill-node: drill agent (3 pods)".
func (n Node) Line() string {
	var b strings.Builder
	b.WriteString(n.Name + ": ")
	switch {
	case n.Error != "":
		b.WriteString("unknown (" + n.Error + ")")
	case n.Kind == NodeAgent:
		b.WriteString(NodeAgent)
	default:
		b.WriteString(n.Kind + " " + n.KubeletVersion + ", " + n.ContainerRuntime)
	}
	fmt.Fprintf(&b, " (%d pods)", n.Pods)
	return b.String()
}

// Priority says how a local run shared this machine's CPU between drill
// (the load generator and the clock that judges it) and the system under
// test (the services' replicas and local dependencies).
type Priority struct {
	// Mode is cgroup-v1 or cgroup-v2 (a cgroup of the run), nice (no
	// cgroup could be made) or same (sutPriority: same, no cgroup needed).
	Mode string `json:"mode"`
	// Cgroup is the run's cgroup directory, removed at the run's end (""
	// when none was made).
	Cgroup string `json:"cgroup,omitempty"`
	// WeightFile is cpu.shares or cpu.weight; SUTWeight is its value for
	// the system under test, DrillWeight drill's own (set when the system
	// under test got a lower weight through a cgroup).
	WeightFile  string `json:"weightFile,omitempty"`
	SUTWeight   int    `json:"sutWeight,omitempty"`
	DrillWeight int    `json:"drillWeight,omitempty"`
	// Nice is the nice value of the system under test's processes (mode
	// nice).
	Nice int `json:"nice,omitempty"`
	// Limits are the services' CPU limits (resources.limits.cpu).
	Limits []CPULimit `json:"limits,omitempty"`
	// NoCgroup says why no cgroup was made ("" when one was or none was
	// needed).
	NoCgroup string `json:"noCgroup,omitempty"`
	// Summary is the summary's PRIORITY line.
	Summary string `json:"summary"`
}

// CPULimit is one service's CPU limit and how it was applied.
type CPULimit struct {
	Service string `json:"service"`
	// CPU is the limit as Kubernetes writes it ("500m"); Cores the same in
	// cores.
	CPU   string  `json:"cpu"`
	Cores float64 `json:"cores"`
	// QuotaMicros per PeriodMicros (µs) is each replica's CFS quota; 0 when
	// not applied.
	QuotaMicros  int64 `json:"quotaMicros,omitempty"`
	PeriodMicros int64 `json:"periodMicros,omitempty"`
	// Applied is false where drill could not make cgroups.
	Applied bool `json:"applied"`
}

// Name returns the scenario's name, or "" when the run has no scenario.
func (r *Run) Name() string {
	if r.Scenario == nil {
		return ""
	}
	return r.Scenario.Metadata.Name
}

// Rejudge judges the scenario's assertions again over the recorded plan,
// events and series, replaces Results, recomputes the findings, and
// recomputes ExitCode with [Run.Decide]. It returns the new exit code.
func (r *Run) Rejudge() int {
	var as []scenario.Assertion
	if r.Scenario != nil {
		as = r.Scenario.Assertions
	}
	r.Results = assert.Judge(r.Plan, as, r.Events, r.Series)
	r.ComputeFindings()
	r.ExitCode, _ = r.Decide()
	return r.ExitCode
}

// ComputeFindings computes the run's findings from its plan, scenario,
// events and series ([findings.Compute], pure) and stores them with their
// schema version, replacing any recorded ones: a run.json written before
// findings existed gets them too.
func (r *Run) ComputeFindings() {
	r.Findings = findings.Compute(findings.Input{Plan: r.Plan, Scenario: r.Scenario, Events: r.Events, Series: r.Series})
	r.FindingsSchema = findings.SchemaVersion
}

// Decide returns the exit code the run's record calls for and a one-line
// reason, by docs/DESIGN.md §11 in order of precedence: cleanup unverified
// (5), aborted (3), measurement invalid or an assertion that could not be
// judged or whose window was cut short (4), an assertion failed (1), else 0.
// A record rebuilt from a killed run's journal ([Run.Recovered]) is
// aborted (3) before anything else, its cleanup advice in the reason.
func (r *Run) Decide() (int, string) {
	if r.Recovered {
		// The run never got to its cleanup: it is aborted, and what it may
		// have left is said with the reason.
		why := "the run could not be carried out: " + r.Aborted
		if r.Cleanup.Command != "" {
			why += "; it never verified its cleanup: remove what it may have left with: " + r.Cleanup.Command
		}
		return ExitCouldNotRun, why
	}
	if !r.Cleanup.Verified {
		why := "cleanup could not be verified"
		if len(r.Cleanup.Leftovers) > 0 {
			l := r.Cleanup.Leftovers[0]
			why += ": " + l.Kind + " " + l.Name + " may still be active"
			if l.Remove != "" {
				why += "; remove it with: " + l.Remove
			}
		}
		if c := r.Cleanup.Command; c != "" && (len(r.Cleanup.Leftovers) == 0 || r.Cleanup.Leftovers[0].Remove != c) {
			why += "; remove everything this run left with: " + c
		}
		return ExitCleanupFailed, why
	}
	if r.Aborted != "" {
		return ExitCouldNotRun, "the run could not be carried out: " + r.Aborted
	}
	if !r.Validity.Valid() {
		why := "the measurement is invalid: " + r.Validity.Summary()
		if len(r.Validity.LoadBehind) > 0 && r.CPU != nil {
			// What the machine was doing when the generator fell behind,
			// in the second most of the first such stream's late
			// requests were due, and what to try.
			lateAt := time.Duration(-1)
			if l := r.Validity.LoadBehind[0]; l.WorstLate > 0 {
				lateAt = l.WorstAt
			}
			if x := r.CPU.Explain(lateAt); x != "" {
				why += "; " + x
			}
		}
		return ExitInvalid, why
	}
	var failed []string
	for _, res := range r.Results {
		if res.Verdict == assert.Error {
			return ExitInvalid, "assertion " + res.Name + " could not be judged: " + res.Message
		}
		if res.Verdict == assert.Aborted {
			return ExitInvalid, "assertion " + res.Name + " was " + res.Message
		}
		if res.Verdict != assert.Pass {
			failed = append(failed, res.Name)
		}
	}
	if len(failed) > 0 {
		msg := "assertion failed: " + failed[0]
		if len(failed) > 1 {
			msg = "assertions failed: " + strings.Join(failed, ", ")
		}
		return ExitFail, msg
	}
	return ExitPass, "every assertion passed"
}

// Summary describes why the validity checks failed, in one line.
func (v Validity) Summary() string {
	var parts []string
	for _, l := range v.LoadBehind {
		detail := ""
		if l.LagP99 > 0 {
			detail += ", dispatch lag p99 " + assert.FormatDuration(l.LagP99)
		}
		if l.WorstLate > 0 {
			detail += ", most late requests due in t=" + strconv.FormatFloat(l.WorstAt.Seconds(), 'f', 1, 64) + "-" +
				strconv.FormatFloat((l.WorstAt+time.Second).Seconds(), 'f', 1, 64) + " s (" + strconv.FormatInt(l.WorstLate, 10) + ")"
		}
		late := " of requests later than " + assert.FormatDuration(l.LateAfter)
		if l.Missed > 0 {
			late = " of intended requests later than " + assert.FormatDuration(l.LateAfter) + " or never sent (" +
				strconv.FormatInt(l.Missed, 10) + " of " + strconv.FormatInt(l.Intended, 10) + " never sent)"
		}
		parts = append(parts, "load generator behind schedule on stream "+l.Stream+" ("+
			assert.FormatPercent(l.Fraction)+late+", budget "+assert.FormatPercent(l.Budget)+detail+")")
	}
	for _, c := range v.ConnectionErrors {
		kinds := make([]string, 0, len(c.ByKind))
		for k := range c.ByKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for i, k := range kinds {
			kinds[i] = k + " " + strconv.FormatInt(c.ByKind[k], 10)
		}
		parts = append(parts, "stream "+c.Stream+" failed at connection level on "+assert.FormatPercent(c.Fraction)+
			" of its requests ("+strconv.FormatInt(c.Errors, 10)+"/"+strconv.FormatInt(c.Requests, 10)+": "+strings.Join(kinds, ", ")+
			"), above its bound of "+assert.FormatPercent(c.Bound)+
			": the load did not reach a server (check the target; set maxConnectionErrors on the stream when a fault is meant to break its connections)")
	}
	parts = append(parts, v.Problems...)
	if len(parts) == 0 {
		return "valid"
	}
	return strings.Join(parts, "; ")
}

// States of a [LoadWorker].
const (
	// LoadWorkerDone: the worker finished its schedule.
	LoadWorkerDone = "done"
	// LoadWorkerFailed: the worker failed (its Error says how); the run
	// is invalid.
	LoadWorkerFailed = "failed"
	// LoadWorkerStopped: another worker failed, or the run's load was
	// stopped early.
	LoadWorkerStopped = "stopped"
)

// LoadWorker is what one load worker of a run did (a scenario with
// load.workers): its pod, the requests it sent and how many of them were
// late, its dispatch lag, how late it got ready after its first stream's
// start, and its clock against the API server's. Durations are in ns in
// JSON, as elsewhere in run.json.
type LoadWorker struct {
	// Index is the worker's Job completion index (0..N-1).
	Index int `json:"index"`
	// Pod is the worker's pod ("" when none was seen).
	Pod string `json:"pod,omitempty"`
	// State is LoadWorkerDone, LoadWorkerFailed or LoadWorkerStopped.
	State string `json:"state"`
	// Sent and Late count the worker's requests and those sent later than
	// the stream's lag budget.
	Sent int64 `json:"sent"`
	Late int64 `json:"late"`
	// LagP99 and LagMax are its dispatch lag's 99th percentile and
	// maximum over all its streams.
	LagP99 time.Duration `json:"lagP99"`
	LagMax time.Duration `json:"lagMax"`
	// StartedLate is how long after its first stream's start it got ready
	// (0: in time).
	StartedLate time.Duration `json:"startedLate"`
	// Clock is its clock against the API server's ("-3.96ms ±4.48ms"),
	// "" when it did not measure it.
	Clock string `json:"clock,omitempty"`
	// Error is why it failed, or its own verdict on its schedule.
	Error string `json:"error,omitempty"`
}
