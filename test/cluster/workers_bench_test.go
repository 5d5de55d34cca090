package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Load of the workers benchmark: one stream at workersBenchRate for
// workersBenchDuration against the stub target (which answers after
// stubDelay, so the requests cost the stub no CPU beyond serving them).
const (
	workersBenchRate     = 2000
	workersBenchDuration = 20 * time.Second
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU
// times (100 on every Linux that drill runs on).
const clockTicks = 100

// childrenCPU is the CPU time (user+system) of pid's waited-for children,
// from /proc/PID/stat (cutime and cstime, fields 16 and 17).
func childrenCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from after
	// its closing parenthesis.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, i := range []int{13, 14} { // cutime, cstime (fields 16, 17 of the line)
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, i+3, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// BenchmarkWorkers runs `drill load` of one stream at 2,000 req/s for
// 20 s against the stub target on 1, 2 and 4 load workers of the real
// control plane (drill agent runs each worker pod as a `drill worker`
// process) and prints, per worker count: requests merged, the merged p99,
// the largest worker's dispatch lag p99, the workers' CPU in all and per
// request (the agent's waited-for children: the worker processes), and
// the coordinator's CPU (the `drill load` process: creating the Job,
// following the pods' logs, decoding and merging their seconds) in all,
// per second of load and per worker-second merged. The two cores of this
// machine are shared by the workers, the coordinator, the agent, the
// control plane and the stub: the figures are costs, not a ceiling.
// Run it with -benchtime=1x (one iteration is one drill of 20 s).
func BenchmarkWorkers(b *testing.B) {
	e := requireEnv(b)
	url := stubTarget(b)
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			for range b.N {
				workersBenchOnce(b, e, url, n)
			}
		})
	}
}

func workersBenchOnce(b *testing.B, e *clusterEnv, url string, n int) {
	sc := workersScenarioAt(b, url, n, workersBenchRate, workersBenchDuration)
	before, err := childrenCPU(e.agent.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	r := e.startLoad(b, sc, 15*time.Second)
	code, out := r.wait(b, 3*time.Minute)
	if code != 0 {
		b.Fatalf("drill load on %d workers: exit %d\n%s\n%s", n, code, out, r.p.tail(20))
	}
	// The agent reaps each worker as its process ends, around the end of
	// drill load: wait until the children's CPU has not moved for 2 s.
	after, err := childrenCPU(e.agent.cmd.Process.Pid)
	for deadline, still := time.Now().Add(30*time.Second), 0; still < 10 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		now, err := childrenCPU(e.agent.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		if now == after {
			still++
		} else {
			after, still = now, 0
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	merged := r.total(b)
	var worstLag time.Duration
	for _, m := range workerLine.FindAllStringSubmatch(out, -1) {
		if lag, err := time.ParseDuration(m[6]); err == nil && lag > worstLag {
			worstLag = lag
		}
	}
	ps := r.p.cmd.ProcessState
	coord := ps.UserTime() + ps.SystemTime()
	wcpu := after - before
	secs := workersBenchDuration.Seconds()
	perReq := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(merged.Requests, 1)) }
	fmt.Printf("workers %d at %d req/s for %s: %d requests merged, p99 %s, worst worker lag p99 %s; workers CPU %.2f s (%.0f µs/request); coordinator CPU %.2f s (%.1f ms per second of load, %.1f ms per worker-second merged, %.0f µs/request)\n",
		n, workersBenchRate, workersBenchDuration, merged.Requests, merged.Quantile(99), worstLag,
		wcpu.Seconds(), perReq(wcpu), coord.Seconds(), coord.Seconds()*1000/secs, coord.Seconds()*1000/(secs*float64(n)), perReq(coord))
	b.ReportMetric(perReq(wcpu), "workers-µs/req")
	b.ReportMetric(perReq(coord), "coordinator-µs/req")
}
