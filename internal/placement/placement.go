// Package placement decides where on this machine's CPU the system under
// test of a local run runs: on one machine drill's load generator stands in
// for clients on other machines, so it (and the clock that judges it) gets
// CPU priority over the services' replicas and the throwaway PostgreSQL.
//
// Where drill may create a cgroup (cgroup v1's cpu controller, or v2 with
// the cpu controller delegated to drill's cgroup), a run gets one of its
// own, drill-<run> under drill's cgroup. On cgroup v1 its cpu.shares are
// 1024 per CPU of the machine: the whole system under test weighs as much
// as one busy thread per core, so twenty replicas and PostgreSQL's backends
// cannot crowd out the generator by their number, and a busy neighbour on
// the machine (each of its threads weighs 1024) cannot starve them either,
// which would make a healthy service look slow while the generator stayed
// on schedule (a wrong verdict instead of an INVALID one). On v2 it gets
// cpu.weight 25 against drill's 100. Inside it the
// dependencies share drill-<run>/deps and each replica gets
// drill-<run>/<service>/<pod>, where a service's resources.limits.cpu
// becomes a CFS quota over a 100 ms period, as the kubelet sets it for a
// container. Elsewhere the processes run at nice +5 and CPU limits are not
// applied (the run says so).
//
// Processes get into a [Group] before they run anything: a process
// started from a locked OS thread that called [Group.EnterThread] inherits
// that thread's cgroup (v1) and nice value; [Group.Prepare] sets
// clone3's CLONE_INTO_CGROUP (v2); [Group.Adopt] moves a process started
// elsewhere, and its descendants, after the fact.
package placement

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
)

// Mode is how a run's system under test was placed.
type Mode string

// Modes of a [Placement].
const (
	// ModeCgroupV1 is a cgroup of the run under cgroup v1's cpu controller.
	ModeCgroupV1 Mode = "cgroup-v1"
	// ModeCgroupV2 is a cgroup of the run under cgroup v2 with cpu enabled.
	ModeCgroupV2 Mode = "cgroup-v2"
	// ModeNice is nice +[SUTNice] without a cgroup.
	ModeNice Mode = "nice"
	// ModeSame leaves the system under test at drill's own priority.
	ModeSame Mode = "same"
)

// Weights and limits drill applies.
const (
	// SUTSharesPerCPU is the cgroup v1 cpu.shares of a run's cgroup per CPU
	// of the machine ([SUTShares]); a cgroup or a nice-0 thread has 1024.
	SUTSharesPerCPU = 1024
	// SUTWeight is the cgroup v2 cpu.weight of a run's cgroup; the default
	// is 100.
	SUTWeight = 25
	// SUTNice is the nice value of the system under test where no cgroup
	// may be created; nice 0 weighs 1024, nice +5 335.
	SUTNice = 5
	// CFSPeriod is the CFS period of a CPU limit, the kubelet's 100 ms.
	CFSPeriod = 100 * time.Millisecond
	// MinCFSQuota is the smallest quota the kernel accepts, 1 ms (the
	// kubelet rounds up to it as well).
	MinCFSQuota = time.Millisecond
	// DepsGroup names the cgroup of the dependencies inside a run's cgroup
	// (no service name starts with '_').
	DepsGroup = "_deps"
	// Prefix starts the name of every run's cgroup: drill-<run id>.
	Prefix = "drill-"
)

// SUTShares is the cgroup v1 cpu.shares of a run's cgroup:
// [SUTSharesPerCPU] times the CPUs this process may use.
func SUTShares() int { return SUTSharesPerCPU * runtime.NumCPU() }

// Config says what a run wants.
type Config struct {
	// RunID names the run's cgroup, drill-<RunID>; required.
	RunID string
	// Lower gives the system under test a lower CPU weight than drill
	// (environment.local.sutPriority: lower).
	Lower bool
	// Limits are the services' CPU limits (resources.limits.cpu), by
	// service name; a service not listed is not limited.
	Limits map[string]scenario.CPUQuantity
	// Journal, when set, is called with the absolute path of the run's
	// cgroup before it is created, so that `drill cleanup` can remove it
	// after a run killed with SIGKILL. An error stops the cgroup from
	// being created (then drill falls back to nice).
	Journal func(dir string) error
	// Log receives drill's diagnostics; nil discards.
	Log *slog.Logger

	// NoCgroup, when set, forbids cgroups: the system under test gets nice
	// +5 (when Lower) and CPU limits are not applied, for the reason it
	// gives.
	NoCgroup string

	// procSelf is where /proc/self/{mountinfo,cgroup} are read; "" means
	// /proc/self.
	procSelf string
}

// Placement is where a run's system under test runs. Its methods are safe
// for concurrent use; a nil *Placement places nothing.
type Placement struct {
	cfg   Config
	mode  Mode
	log   *slog.Logger
	v2    bool
	own   string // drill's own cgroup directory
	top   string // drill-<run> directory ("" without cgroups)
	drill int    // drill's own cpu.shares or cpu.weight
	// why says why no cgroup was used ("" when one was).
	why string

	mu      sync.Mutex
	groups  map[string]*Group // by path relative to top
	closed  bool
	created bool
}

// Group is one place processes are put: a cgroup (with the nice value 0),
// or only a nice value. A nil *Group places nothing.
type Group struct {
	mode Mode
	dir  string // cgroup directory; "" in ModeNice and ModeSame
	home string // drill's own cgroup directory (with dir)
	nice int
	// fd is the cgroup directory opened for CLONE_INTO_CGROUP (v2).
	fd *os.File
}

// Setup makes the run's placement: with cgroups, drill-<run> with the lower
// weight when cfg.Lower (the journal is called first); else nice +5 when
// cfg.Lower; else nothing. It never fails for want of cgroups: it falls
// back to nice and says why in [Placement.Warnings] and [Placement.Report].
// Errors: an empty or unusable run id.
func Setup(cfg Config) (*Placement, error) {
	if cfg.RunID == "" || strings.ContainsAny(cfg.RunID, "/\x00") || cfg.RunID == "." || cfg.RunID == ".." {
		return nil, fmt.Errorf("place the system under test: unusable run id %q", cfg.RunID)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Placement{cfg: cfg, log: log, groups: map[string]*Group{}, mode: ModeSame}
	if !cfg.Lower && len(cfg.Limits) == 0 {
		return p, nil
	}
	err := p.makeCgroup()
	if err == nil {
		return p, nil
	}
	p.why = err.Error()
	log.Info("no cgroup for the system under test; using nice", "reason", p.why)
	if cfg.Lower {
		p.mode = ModeNice
	}
	return p, nil
}

// makeCgroup finds drill's cgroup and creates drill-<run> under it.
func (p *Placement) makeCgroup() error {
	if p.cfg.NoCgroup != "" {
		return errors.New(p.cfg.NoCgroup)
	}
	h, err := discover(p.cfg.procSelf)
	if err != nil {
		return err
	}
	p.v2, p.own = h.v2, h.dir
	p.top = filepath.Join(h.dir, Prefix+p.cfg.RunID)
	if p.v2 {
		p.drill = readInt(filepath.Join(h.dir, "cpu.weight"), 100)
		if err := enableCPU(h.dir); err != nil {
			return err
		}
	} else {
		p.drill = readInt(filepath.Join(h.dir, "cpu.shares"), 1024)
	}
	if p.cfg.Journal != nil {
		if err := p.cfg.Journal(p.top); err != nil {
			return fmt.Errorf("journal cgroup %s: %w", p.top, err)
		}
	}
	if err := os.Mkdir(p.top, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	p.created = true
	if err := p.configureTop(); err != nil {
		_, _ = Remove(p.top)
		p.created = false
		return err
	}
	if p.v2 {
		p.mode = ModeCgroupV2
	} else {
		p.mode = ModeCgroupV1
	}
	if !p.cfg.Lower {
		p.mode = ModeSame
	}
	return nil
}

func (p *Placement) configureTop() error {
	if p.v2 {
		if p.cfg.Lower {
			if err := write(filepath.Join(p.top, "cpu.weight"), strconv.Itoa(SUTWeight)); err != nil {
				return err
			}
		}
		return write(filepath.Join(p.top, "cgroup.subtree_control"), "+cpu")
	}
	if p.cfg.Lower {
		return write(filepath.Join(p.top, "cpu.shares"), strconv.Itoa(SUTShares()))
	}
	return nil
}

// Mode is how the system under test is placed.
func (p *Placement) Mode() Mode {
	if p == nil {
		return ModeSame
	}
	return p.mode
}

// Cgroup is the absolute path of the run's cgroup ("" when none was made).
func (p *Placement) Cgroup() string {
	if p == nil || !p.created {
		return ""
	}
	return p.top
}

// Deps is the group of the run's dependencies (nil: leave them where drill
// is). Errors: the cgroup could not be created.
func (p *Placement) Deps() (*Group, error) {
	if p == nil {
		return nil, nil
	}
	return p.group(DepsGroup, 0)
}

// Replica is the group of one replica (pod) of service: in cgroups
// drill-<run>/<service>/<pod>, limited to the service's CPU limit; nil when
// the replica stays where drill is. Errors: the cgroup could not be
// created or its quota not written.
func (p *Placement) Replica(service, pod string) (*Group, error) {
	if p == nil {
		return nil, nil
	}
	if !validName(service) || !validName(pod) {
		return nil, fmt.Errorf("place pod %s of %s: unusable name", pod, service)
	}
	if p.created {
		if _, err := p.group(service, 0); err != nil {
			return nil, err
		}
	}
	return p.group(filepath.Join(service, pod), p.cfg.Limits[service])
}

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// group returns (making it once) the group at rel inside the run's cgroup.
func (p *Placement) group(rel string, limit scenario.CPUQuantity) (*Group, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.groups[rel]; ok {
		return g, nil
	}
	var g *Group
	switch {
	case p.closed:
		return nil, fmt.Errorf("place %s: the run's placement is closed", rel)
	case p.created:
		dir := filepath.Join(p.top, rel)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		g = &Group{mode: p.mode, dir: dir, home: p.own}
		g.mode = ModeCgroupV1
		if p.v2 {
			g.mode = ModeCgroupV2
			// v2 allows processes only in leaves: a service's cgroup holds
			// its pods' cgroups, which hold the processes.
			leaf := strings.Contains(rel, "/") || rel == DepsGroup
			if !leaf {
				if err := write(filepath.Join(dir, "cgroup.subtree_control"), "+cpu"); err != nil {
					return nil, err
				}
			}
		}
		if limit > 0 {
			if err := writeQuota(dir, p.v2, limit); err != nil {
				return nil, err
			}
		}
		if p.v2 {
			fd, err := os.Open(dir)
			if err != nil {
				return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
			}
			g.fd = fd
		}
	case p.mode == ModeNice:
		g = &Group{mode: ModeNice, nice: SUTNice}
	}
	p.groups[rel] = g
	return g, nil
}

// Quota returns the CFS quota of limit over [CFSPeriod], at least
// [MinCFSQuota], as the kubelet computes it.
func Quota(limit scenario.CPUQuantity) time.Duration {
	q := time.Duration(limit.Millis()) * CFSPeriod / 1000
	return max(q, MinCFSQuota)
}

func writeQuota(dir string, v2 bool, limit scenario.CPUQuantity) error {
	period := CFSPeriod.Microseconds()
	quota := Quota(limit).Microseconds()
	if v2 {
		return write(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quota, period))
	}
	if err := write(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatInt(period, 10)); err != nil {
		return err
	}
	return write(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
}

// Close removes the run's cgroup; call it once every process placed in it
// has exited (it waits up to 10 s for exiting ones). Later calls to
// [Placement.Deps] and [Placement.Replica] fail. Errors name the cgroup and
// the processes still in it. Idempotent.
func (p *Placement) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, g := range p.groups {
		if g != nil && g.fd != nil {
			_ = g.fd.Close()
		}
	}
	if !p.created {
		return nil
	}
	if _, err := Remove(p.top); err != nil {
		return err
	}
	p.log.Debug("removed the run's cgroup", "cgroup", p.top)
	return nil
}

// Remove removes the cgroup dir and every cgroup below it, deepest first,
// waiting up to 10 s for processes still in them to exit. gone says dir did
// not exist. It refuses a directory that is not a cgroup or whose name
// does not start with [Prefix]. Errors name the cgroup and the processes
// still in it.
func Remove(dir string) (gone bool, err error) {
	if !strings.HasPrefix(filepath.Base(dir), Prefix) || !filepath.IsAbs(dir) {
		return false, fmt.Errorf("remove cgroup %s: not a cgroup of a drill run", dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return true, nil
		}
		return false, fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
		return false, fmt.Errorf("remove cgroup %s: not on a cgroup file system", dir)
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	deadline := time.Now().Add(10 * time.Second)
	for _, d := range dirs {
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return false, fmt.Errorf("remove cgroup %s: %w (processes still in it: %s)", d, err, procsOf(d))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return false, nil
}

func procsOf(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "none"
	}
	return strings.Join(f, " ")
}

// Prepare makes cmd start inside g (cgroup v2: clone3 with
// CLONE_INTO_CGROUP); it does nothing for other modes, which
// [Group.EnterThread] or [Group.Adopt] handle.
func (g *Group) Prepare(cmd *exec.Cmd) {
	if g == nil || g.fd == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(g.fd.Fd())
}

// EnterThread puts the calling OS thread into g (cgroup v1) and sets its
// nice value, so that every process it starts from now on begins there.
// Call it only from a goroutine locked to its thread (runtime.LockOSThread).
// leave puts the thread back where it was (drill's cgroup, its nice
// value); only when leave returns nil may the goroutine unlock the thread,
// otherwise the thread must end with the goroutine (Go may run a locked
// goroutine on the main thread, which never ends: leave matters there, or
// the thread would keep the cgroup busy). Errors: the cgroup or the nice
// value could not be set; then the thread is as it was, or must end.
func (g *Group) EnterThread() (leave func() error, err error) {
	if g == nil {
		return func() error { return nil }, nil
	}
	tid := unix.Gettid()
	oldNice, err := threadNice(tid)
	if err != nil {
		return nil, err
	}
	leave = func() error {
		var errs []error
		if g.mode == ModeCgroupV1 && g.dir != "" {
			if err := write(filepath.Join(g.home, "tasks"), strconv.Itoa(tid)); err != nil {
				errs = append(errs, fmt.Errorf("move spawning thread back into drill's cgroup: %w", err))
			}
		}
		if g.nice != 0 {
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, oldNice); err != nil {
				errs = append(errs, fmt.Errorf("set nice %+d back on spawning thread %d: %w", oldNice, tid, err))
			}
		}
		return errors.Join(errs...)
	}
	if g.mode == ModeCgroupV1 && g.dir != "" {
		if err := write(filepath.Join(g.dir, "tasks"), strconv.Itoa(tid)); err != nil {
			return nil, fmt.Errorf("move spawning thread into cgroup: %w", err)
		}
	}
	if g.nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, g.nice); err != nil {
			_ = leave()
			return nil, fmt.Errorf("set nice %+d on spawning thread %d: %w", g.nice, tid, err)
		}
	}
	return leave, nil
}

// threadNice is the nice value of thread tid.
func threadNice(tid int) (int, error) {
	// getpriority(2)'s raw value is 20 - nice.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return 0, fmt.Errorf("read nice of thread %d: %w", tid, err)
	}
	return 20 - prio, nil
}

// Adopt moves the process pid, every thread of it, and every process in its
// process group or below it into g, walking the tree again until a walk
// finds nothing new (a process may fork meanwhile). Use it for processes
// started without [Group.EnterThread] or [Group.Prepare]. Errors: a
// process that still exists could not be moved or reniced.
func (g *Group) Adopt(pid int) error {
	if g == nil {
		return nil
	}
	if pid <= 1 {
		return fmt.Errorf("adopt process %d: refusing a pid <= 1", pid)
	}
	done := map[int]bool{}
	for range 5 {
		tree, err := proctree.Tree(pid)
		if err != nil {
			return fmt.Errorf("adopt process %d: %w", pid, err)
		}
		tree = append([]int{pid}, tree...)
		moved := false
		for _, p := range tree {
			if done[p] {
				continue
			}
			done[p] = true
			moved = true
			if err := g.adoptOne(p); err != nil && proctree.Alive(p) {
				return err
			}
		}
		if !moved {
			return nil
		}
	}
	return nil
}

func (g *Group) adoptOne(pid int) error {
	if g.dir != "" {
		if err := write(filepath.Join(g.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move process %d into cgroup: %w", pid, err)
		}
	}
	if g.nice == 0 {
		return nil
	}
	tids, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("list threads of process %d: %w", pid, err)
	}
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, g.nice); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("set nice %+d on process %d: %w", g.nice, pid, err)
		}
	}
	return nil
}

// Dir is the group's cgroup directory ("" when it is only a nice value).
func (g *Group) Dir() string {
	if g == nil {
		return ""
	}
	return g.dir
}

// Nice is the nice value the group's processes get (0: unchanged).
func (g *Group) Nice() int {
	if g == nil {
		return 0
	}
	return g.nice
}

func write(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, path, err)
	}
	return nil
}

func readInt(path string, def int) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return def
	}
	return n
}
