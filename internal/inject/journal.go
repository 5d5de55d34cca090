package inject

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drillhq/drill/internal/proctree"
)

// Journal operations.
const (
	// OpApply is written BEFORE a fault is applied.
	OpApply = "apply"
	// OpRevert is written after a fault was reverted.
	OpRevert = "revert"
)

// Journal entry kinds: what was changed, hence how to undo it.
const (
	KindToxic          = "toxic"           // remove Toxic from Proxy at Toxiproxy
	KindProxyDisabled  = "proxy-disabled"  // re-enable Proxy at Toxiproxy
	KindProxyCreated   = "proxy-created"   // delete Proxy at Toxiproxy
	KindProcessPause   = "process-pause"   // SIGCONT Procs (and group PGID while its leader lives)
	KindContainerPause = "container-pause" // unpause Container
	// KindPostgres is a throwaway PostgreSQL cluster a run started (not a
	// fault): continue and kill the processes working in Dir (and Procs),
	// then remove Dir. Journaled when its temp dir is created; reverted
	// once the run stopped it and removed the dir.
	KindPostgres = "postgres"
	// KindCgroup is the cgroup a run made for its system under test
	// (internal/placement): remove Cgroup once its processes are gone. The
	// run removes it at teardown, after its faults were verified, so
	// [VerifyRun] does not list it.
	KindCgroup = "cgroup"
)

// Entry is one JSON line of a journal.
type Entry struct {
	Time time.Time `json:"time"`
	Run  string    `json:"run"`
	Op   string    `json:"op"`
	// Key identifies the change within the run; an OpRevert closes the
	// OpApply with the same Key.
	Key   string `json:"key"`
	Kind  string `json:"kind"`
	Fault string `json:"fault,omitempty"`
	// Toxiproxy is the API URL (toxic, proxy kinds).
	Toxiproxy string `json:"toxiproxy,omitempty"`
	// Embedded says Toxiproxy ran inside the drill process: its proxies and
	// toxics ended with that process.
	Embedded bool   `json:"embedded,omitempty"`
	Proxy    string `json:"proxy,omitempty"`
	Toxic    string `json:"toxic,omitempty"`
	// PGID is the paused process group. Procs are the processes of its tree
	// with their start times, journaled before they are stopped (and again
	// with any found while stopping), so cleanup can continue them even
	// after the group's leader died. PIDs is the older form without start
	// times (read from old journals only).
	PGID      int           `json:"pgid,omitempty"`
	Procs     []proctree.ID `json:"procs,omitempty"`
	PIDs      []int         `json:"pids,omitempty"`
	Container string        `json:"container,omitempty"`
	// Dependency names the paused dependency (process/container pause) or
	// the started one (KindPostgres).
	Dependency string `json:"dependency,omitempty"`
	// Dir is a throwaway PostgreSQL's temp dir (KindPostgres): absolute,
	// its base name starting with drill-pg-.
	Dir string `json:"dir,omitempty"`
	// Cgroup is the absolute path of the run's cgroup (cgroup kind).
	Cgroup string `json:"cgroup,omitempty"`
	// Service is the local service whose pods a pod-kill or rollout ended
	// (KindLocalPods); Replicas its declared replica count; Pods the pods
	// ended (the pod-kill's choice, or a rollout's old pods); Seed the
	// seed of a random choice.
	Service  string   `json:"service,omitempty"`
	Replicas int      `json:"replicas,omitempty"`
	Pods     []string `json:"pods,omitempty"`
	Seed     *int64   `json:"seed,omitempty"`
	// Namespace, Kubeconfig and Context locate the cluster of a
	// kubernetes platform fault (KindKubePods, KindKubeDeployment);
	// Kubeconfig "" is kubectl's default loading.
	Namespace  string `json:"namespace,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// PodUIDs are the UIDs of Pods (KindKubePods).
	PodUIDs []string `json:"podUIDs,omitempty"`
	// Deployment is the Deployment a rollout restarted
	// (KindKubeDeployment); Strategy its spec.strategy before drill wrote
	// maxSurge or maxUnavailable into it (JSON), empty when drill left it
	// alone.
	Deployment string `json:"deployment,omitempty"`
	Strategy   string `json:"strategy,omitempty"`
	// Node is the node a drain cordoned (KindKubeNode); WasCordoned says
	// it was cordoned before, so cleanup leaves it so.
	Node        string `json:"node,omitempty"`
	WasCordoned bool   `json:"wasCordoned,omitempty"`
	// Containers are the engine ids of a Compose service's containers a
	// pod-kill or rollout acts on (KindComposePods; Pods are their
	// names); Stopping those being stopped when the entry was written;
	// GraceSeconds the service's stop grace period.
	Containers   []string `json:"containers,omitempty"`
	Stopping     []string `json:"stopping,omitempty"`
	GraceSeconds int      `json:"graceSeconds,omitempty"`
}

// Journal is an append-only JSON-lines file per run, synced to disk after
// every entry so that a SIGKILLed run can be cleaned up. A nil *Journal
// records nothing. Safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	run  string
}

// DefaultStateDir is $XDG_STATE_HOME/drill, or $HOME/.local/state/drill.
// getenv is injected (os.Getenv in the app).
func DefaultStateDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "drill"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("find state dir: neither XDG_STATE_HOME nor HOME is set; pass --state-dir")
	}
	return filepath.Join(home, ".local", "state", "drill"), nil
}

// JournalDir is where the journals of stateDir live.
func JournalDir(stateDir string) string { return filepath.Join(stateDir, "runs") }

// JournalPath is the journal file of one run.
func JournalPath(stateDir, runID string) string {
	return filepath.Join(JournalDir(stateDir), runID+".jsonl")
}

// OpenJournal creates (or appends to) the journal of runID under stateDir.
func OpenJournal(stateDir, runID string) (*Journal, error) {
	if err := ValidRunID(runID); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	dir := JournalDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create journal dir: %w", err)
	}
	p := JournalPath(stateDir, runID)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	return &Journal{f: f, path: p, run: runID}, nil
}

// Path is the journal's file path ("" for nil).
func (j *Journal) Path() string {
	if j == nil {
		return ""
	}
	return j.path
}

// Record appends e (Time and Run filled in) and syncs the file.
func (j *Journal) Record(e Entry) error {
	if j == nil {
		return nil
	}
	e.Time = time.Now().UTC()
	if e.Run == "" {
		e.Run = j.run
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode journal entry: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("write journal %s: closed", j.path)
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	return nil
}

// Close closes the file. Idempotent.
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// ReadJournal reads every entry of a journal file. A torn last line (the run
// died while writing) is ignored.
func ReadJournal(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	var bad error
	for sc.Scan() {
		line++
		if bad != nil { // a bad line followed by more lines is corruption
			return out, bad
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var e Entry
		if err := json.Unmarshal([]byte(text), &e); err != nil {
			bad = fmt.Errorf("read journal %s line %d: %w", path, line, err)
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read journal %s: %w", path, err)
	}
	return out, nil
}

// Pending returns the OpApply entries not closed by a later OpRevert of the
// same Key, in the order they were applied. A later OpApply of a Key still
// open replaces the earlier one in place (a fault journaled again with more
// detail, e.g. the processes a pause found after stopping); an OpApply after
// an OpRevert opens the Key again.
func Pending(entries []Entry) []Entry {
	var out []Entry
	var open []bool
	at := map[string]int{} // key -> index in out while open
	for _, e := range entries {
		k := e.Run + "\x00" + e.Key
		switch e.Op {
		case OpApply:
			if i, ok := at[k]; ok {
				out[i] = e
				continue
			}
			at[k] = len(out)
			out = append(out, e)
			open = append(open, true)
		case OpRevert:
			if i, ok := at[k]; ok {
				open[i] = false
				delete(at, k)
			}
		}
	}
	var kept []Entry
	for i, e := range out {
		if open[i] {
			kept = append(kept, e)
		}
	}
	return kept
}

// JournalRuns lists the run ids that have a journal under stateDir, sorted.
func JournalRuns(stateDir string) ([]string, error) {
	runs, err := ListJournals(JournalDir(stateDir), ".jsonl")
	if err != nil {
		return nil, fmt.Errorf("list journals: %w", err)
	}
	return runs, nil
}

// ListJournals lists the run ids that have a journal file RUN+ext (ext
// with its dot, e.g. ".jsonl") in dir, a directory of one kind of journal
// under a state dir, sorted. A missing dir holds none. Errors: dir cannot
// be read (the [os.ReadDir] error, which names it).
func ListJournals(dir, ext string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []string
	for _, e := range ents {
		if run, ok := strings.CutSuffix(e.Name(), ext); ok && !e.IsDir() {
			runs = append(runs, run)
		}
	}
	sort.Strings(runs)
	return runs, nil
}
