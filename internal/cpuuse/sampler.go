package cpuuse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kinds of part.
const (
	// KindDrill is drill's own process (load engine, measurement, probes,
	// observers, and what still runs inside it: see the part's Note).
	KindDrill = "drill"
	// KindPlatform is a stand-in of the platform in a process of its own
	// (internal/standin: the run's Toxiproxy, its HTTP stubs, the local
	// Services): the cost of the drill's world, like drill's own, not of
	// the system under test.
	KindPlatform = "platform"
	// KindService is a service's replica process trees.
	KindService = "service"
	// KindDependency is a dependency's processes (a throwaway PostgreSQL).
	KindDependency = "dependency"
)

// Part is one part of a run whose CPU a [Sampler] measures.
type Part struct {
	// Name is how the summary names it: "drill", "order-gateway
	// replicas", "postgres".
	Name string
	// Kind is [KindDrill], [KindPlatform], [KindService] or
	// [KindDependency].
	Kind string
	// Self measures this process alone (utime+stime of drill, not the
	// children it reaped: replicas that exited are their own part's).
	Self bool
	// PIDs returns the roots of the part's process trees now (each
	// replica's process, a postmaster); called at every sample, so
	// replicas restarted meanwhile are followed. Each root counts with
	// all its descendants.
	PIDs func() []int
	// Note says what the figure covers, e.g. "includes the embedded
	// Toxiproxy"; copied to [PartUsage].
	Note string
}

// Options configure a [Sampler].
type Options struct {
	// Parts are measured in this order (the summary's order).
	Parts []Part
	// Interval between samples; default 1 s.
	Interval time.Duration
	// Now returns the run clock's offset (t=0 when load started); it
	// stamps each sample. Required.
	Now func() time.Duration
	// ProcRoot is where /proc is mounted; default "/proc" (tests).
	ProcRoot string
	// Log receives a warning when a sample cannot be read; nil: none.
	Log *slog.Logger
}

// rootKey names a process across PID reuse.
type rootKey struct {
	pid   int
	start uint64
}

// partState is a part's running account: per root process its ticks at
// the first sample that saw it (0 for one that started after the sampler)
// and at the latest one; a root that exits keeps its last figure.
type partState struct {
	part        Part
	base, last  map[rootKey]uint64
	roots       int
	selfBase    uint64
	selfStarted bool
}

// ticks is the part's CPU ticks since the sampler started.
func (ps *partState) ticks() uint64 {
	var n uint64
	for k, v := range ps.last {
		if b := ps.base[k]; v > b {
			n += v - b
		}
	}
	return n
}

// sample is one reading: the machine's ticks and each part's ticks since
// the sampler started.
type sample struct {
	at      time.Duration
	machine machineStat
	parts   []uint64
	// wait is drill's run-queue wait (ns, summed over its threads) since
	// the first sample; waitOK is false where it could not be read.
	wait   uint64
	waitOK bool
	// self is drill's own totals ([ReadSelf]).
	self Self
}

// Sampler samples the CPU of a run's parts and of the machine once per
// Interval, from [Start] to [Sampler.Stop]. Safe for concurrent use.
type Sampler struct {
	opts       Options
	startTicks uint64
	self       int
	wait       waitAccount
	cancel     context.CancelFunc
	done       chan struct{}

	mu      sync.Mutex
	parts   []*partState
	samples []sample
	errs    []string
	stopped *Usage
}

// Start takes the first sample now and then one every opts.Interval until
// ctx ends or Stop is called. It returns an error when /proc cannot be
// read (not Linux, /proc not mounted) or opts.Now is nil.
func Start(ctx context.Context, opts Options) (*Sampler, error) {
	if opts.Now == nil {
		return nil, errors.New("cpu sampler: no clock")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	uptime, err := readUptime(opts.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("cpu sampler: %w", err)
	}
	s := &Sampler{opts: opts, startTicks: uptime, self: os.Getpid(), done: make(chan struct{})}
	for _, p := range opts.Parts {
		s.parts = append(s.parts, &partState{part: p, base: map[rootKey]uint64{}, last: map[rootKey]uint64{}})
	}
	if err := s.sample(); err != nil {
		return nil, fmt.Errorf("cpu sampler: %w", err)
	}
	ctx, s.cancel = context.WithCancel(ctx)
	go s.loop(ctx)
	return s, nil
}

func (s *Sampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.sample(); err != nil && s.opts.Log != nil {
				s.opts.Log.Warn("cpu sample failed", "err", err)
			}
		}
	}
}

// readUptime returns the seconds since boot from root/uptime, in ticks.
func readUptime(root string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(root, "uptime"))
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("parse %s: empty", filepath.Join(root, "uptime"))
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("parse uptime: %w", err)
	}
	return uint64(v * TicksPerSecond), nil
}

// sample reads /proc once and appends a sample.
func (s *Sampler) sample() error {
	m, err := readMachine(s.opts.ProcRoot)
	if err != nil {
		return err
	}
	// The wall span between samples is the capacity's measure, so the
	// clock is read beside /proc/stat, not after the process table.
	at := s.opts.Now()
	var procs map[int]procStat
	var kids map[int][]int
	for _, ps := range s.parts {
		if ps.part.PIDs != nil {
			procs, err = readAll(s.opts.ProcRoot)
			if err != nil {
				return err
			}
			kids = children(procs)
			break
		}
	}
	var self procStat
	var delays map[int]uint64
	selfErr, waitErr := error(nil), error(nil)
	if s.hasSelf() {
		self, selfErr = readProc(s.opts.ProcRoot, s.self)
		delays, waitErr = readRunDelays(s.opts.ProcRoot, s.self)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped != nil {
		return nil
	}
	sm := sample{at: at, machine: m, parts: make([]uint64, len(s.parts)), self: ReadSelf()}
	if s.hasSelf() && waitErr == nil {
		sm.wait, sm.waitOK = s.wait.add(delays), true
	}
	for i, ps := range s.parts {
		if ps.part.Self {
			if selfErr == nil {
				if !ps.selfStarted {
					ps.selfBase, ps.selfStarted = self.own, true
				}
				ps.last[rootKey{pid: s.self}] = self.own
				ps.base[rootKey{pid: s.self}] = ps.selfBase
			}
		}
		if ps.part.PIDs != nil {
			roots := ps.part.PIDs()
			ps.roots = 0
			for _, pid := range roots {
				p, ok := procs[pid]
				if !ok || pid <= 0 {
					continue
				}
				n, _ := treeTicks(procs, kids, pid)
				k := rootKey{pid: pid, start: p.start}
				if _, seen := ps.base[k]; !seen {
					if p.start > s.startTicks {
						ps.base[k] = 0 // started after the sampler: all its CPU is the run's
					} else {
						ps.base[k] = n
					}
				}
				ps.last[k] = n
				ps.roots++
			}
		}
		sm.parts[i] = ps.ticks()
	}
	s.samples = append(s.samples, sm)
	if selfErr != nil {
		s.errs = appendOnce(s.errs, selfErr.Error())
	}
	if waitErr != nil && !errors.Is(waitErr, os.ErrNotExist) {
		s.errs = appendOnce(s.errs, waitErr.Error())
	}
	return nil
}

func (s *Sampler) hasSelf() bool {
	for _, ps := range s.parts {
		if ps.part.Self {
			return true
		}
	}
	return false
}

func appendOnce(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// Stop takes a last sample, stops sampling and returns the usage over the
// whole span. Later calls return the same usage.
func (s *Sampler) Stop() *Usage {
	s.cancel()
	<-s.done
	if err := s.sample(); err != nil {
		s.mu.Lock()
		s.errs = appendOnce(s.errs, err.Error())
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = s.usage()
	}
	return s.stopped
}

// usage builds the record from the samples (s.mu held).
func (s *Sampler) usage() *Usage {
	u := &Usage{Problems: append([]string(nil), s.errs...)}
	if len(s.samples) == 0 {
		return u
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	u.Cores = last.machine.cores
	u.From, u.To = first.at, last.at
	partTicks := make([]uint64, len(s.parts))
	var partSum uint64
	for i := range s.parts {
		partTicks[i] = last.parts[i] - first.parts[i]
		partSum += partTicks[i]
	}
	total, busy := machineSpan(first, last, partSum)
	u.CapacitySeconds = seconds(total)
	u.BusySeconds = seconds(busy)
	u.StealSeconds = seconds(last.machine.steal - first.machine.steal)
	u.Busy = share(busy, total)
	for i, ps := range s.parts {
		d := partTicks[i]
		u.Parts = append(u.Parts, PartUsage{
			Name: ps.part.Name, Kind: ps.part.Kind, Seconds: seconds(d), Share: share(d, total),
			Processes: ps.roots, Note: ps.part.Note,
		})
	}
	allocs := last.self.Since(first.self)
	u.DrillAllocObjects, u.DrillAllocBytes = allocs.AllocObjects, allocs.AllocBytes
	waited := first.waitOK && last.waitOK
	if waited {
		w := nanoSeconds(last.wait - first.wait)
		u.DrillWaitSeconds = &w
	}
	for j := 1; j < len(s.samples); j++ {
		a, b := s.samples[j-1], s.samples[j]
		var sum uint64
		for i := range s.parts {
			sum += b.parts[i] - a.parts[i]
		}
		tot, busy := machineSpan(a, b, sum)
		sec := Second{At: a.at, Busy: share(busy, tot), Parts: make([]float64, len(s.parts))}
		for i := range s.parts {
			sec.Parts[i] = share(b.parts[i]-a.parts[i], tot)
		}
		if waited && a.waitOK && b.waitOK {
			sec.DrillWait = nanoSeconds(b.wait - a.wait)
		}
		u.Seconds = append(u.Seconds, sec)
	}
	return u
}

// machineSpan returns the machine's CPU capacity and busy time between
// samples a and b, in ticks. The capacity is cores x the wall span
// between the two /proc/stat reads, and busy is that capacity less the
// idle+iowait /proc/stat counted, never less than partTicks (the run's
// parts' own CPU, which the kernel keeps per task from the scheduler's
// clock) nor more than the capacity. /proc/stat's busy fields are
// sampled once per tick and lose ticks under virtualisation, while the
// tickless (NO_HZ) kernel keeps idle from its clock: on a 2-core KVM
// guest (haltpoll idle driver) /proc/stat's total fell 7.6 % short of
// cores x uptime, and a payment drill's run read 34 % busy from the busy
// ticks while its parts alone used 38 % of cores x span; the complement
// of idle said 41 %. Where the span is unknown, /proc/stat's own counts
// are used.
func machineSpan(a, b sample, partTicks uint64) (total, busy uint64) {
	idle := b.machine.idle - a.machine.idle
	total = b.machine.total() - a.machine.total()
	busy = b.machine.busy - a.machine.busy
	if span := b.at - a.at; span > 0 && b.machine.cores > 0 {
		total = uint64(math.Round(span.Seconds() * TicksPerSecond * float64(b.machine.cores)))
		busy = 0
		if total > idle {
			busy = total - idle
		}
	}
	busy = min(max(busy, partTicks), total)
	return total, busy
}

// seconds converts ticks to seconds.
func seconds(ticks uint64) float64 { return round3(float64(ticks) / TicksPerSecond) }

// nanoSeconds converts ns to seconds, rounded to 1 ms.
func nanoSeconds(ns uint64) float64 { return round3(float64(ns) / 1e9) }

// share is part/total rounded to 0.001 (0 when total is 0), at most 1.
func share(part, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return round3(min(float64(part)/float64(total), 1))
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
