package inject

import (
	"context"
	"errors"
	"fmt"
	"github.com/drillhq/drill/internal/compose"
	"sort"
	"strings"
)

// Leftover is something drill applied that is still in effect.
type Leftover struct {
	// RunID is the run that applied it ("" if unknown).
	RunID string `json:"run,omitempty"`
	// Kind is one of the journal kinds (KindToxic, KindProxyDisabled, ...).
	Kind string `json:"kind"`
	// Toxiproxy, Proxy and Toxic locate a toxic or a disabled proxy.
	Toxiproxy string `json:"toxiproxy,omitempty"`
	Proxy     string `json:"proxy,omitempty"`
	Toxic     string `json:"toxic,omitempty"`
	// PGID is a process group still stopped; Container a container still paused.
	PGID      int    `json:"pgid,omitempty"`
	Container string `json:"container,omitempty"`
	// Dependency and Dir name a throwaway PostgreSQL (KindPostgres).
	Dependency string `json:"dependency,omitempty"`
	Dir        string `json:"dir,omitempty"`
	// Detail says what [Cleanup] did about it, e.g. "continued and
	// killed 6 processes, removed 43 MB"; "" elsewhere.
	Detail string `json:"detail,omitempty"`
	// Cgroup is a run's cgroup not yet removed.
	Cgroup string `json:"cgroup,omitempty"`
	// Service is the local service of a pod-kill or rollout fault
	// (KindLocalPods), the Compose service of one (KindComposePods), or
	// the kubernetes service of one (KindKubePods, KindKubeDeployment);
	// Fault the fault.
	Service string `json:"service,omitempty"`
	Fault   string `json:"fault,omitempty"`
}

// String describes the leftover in one line.
func (l Leftover) String() string {
	switch l.Kind {
	case KindToxic:
		return fmt.Sprintf("toxic %s on proxy %s at %s", l.Toxic, l.Proxy, l.Toxiproxy)
	case KindProxyDisabled:
		return fmt.Sprintf("proxy %s disabled at %s", l.Proxy, l.Toxiproxy)
	case KindProxyCreated:
		return fmt.Sprintf("proxy %s created at %s", l.Proxy, l.Toxiproxy)
	case KindProcessPause:
		return fmt.Sprintf("process group %d stopped", l.PGID)
	case KindContainerPause:
		return fmt.Sprintf("container %.12s paused", l.Container)
	case KindPostgres:
		s := fmt.Sprintf("throwaway PostgreSQL %s in %s", l.Dependency, l.Dir)
		if l.Detail != "" {
			s += ": " + l.Detail
		}
		return s
	case KindCgroup:
		return "cgroup " + l.Cgroup
	case KindLocalPods:
		s := fmt.Sprintf("pods of local service %s ended by fault %s", l.Service, l.Fault)
		if l.Detail != "" {
			s += ": " + l.Detail
		}
		return s
	case KindComposePods:
		s := fmt.Sprintf("containers of Compose service %s stopped by fault %s", l.Service, l.Fault)
		if l.Detail != "" {
			s += ": " + l.Detail
		}
		return s
	case KindKubePods, KindKubeDeployment, KindKubeNode:
		what := "pods of service"
		switch l.Kind {
		case KindKubeDeployment:
			what = "rollout of Deployment"
		case KindKubeNode:
			what = "drain of the node of service"
		}
		s := fmt.Sprintf("%s %s (kubernetes) by fault %s", what, l.Service, l.Fault)
		if l.Detail != "" {
			s += ": " + l.Detail
		}
		return s
	case KindStandIn:
		s := "stand-in process " + l.Dependency
		if l.Detail != "" {
			s += ": " + l.Detail
		}
		return s
	case KindCompose:
		s := fmt.Sprintf("compose project %s (containers and network labelled %s)", l.Dependency, compose.LabelRun)
		if l.Detail != "" {
			s += ": " + l.Detail
		}
		return s
	}
	return l.Kind
}

// Leftovers lists every toxic named drill-* on tp, whatever its run: what
// killed runs left behind. `drill run` reports them at start; `drill
// cleanup` removes them. Sorted by run, proxy, toxic.
func Leftovers(ctx context.Context, tp Toxiproxy) ([]Leftover, error) {
	return toxicsWithPrefix(ctx, tp, ToxicPrefix)
}

// Verify reads the proxies of tp back and lists the toxics of run runID
// still present. A non-empty result or an error means cleanup is unverified
// (exit 5; see [UnverifiedMessage]). Use [VerifyRun] to include disabled
// proxies and paused processes from the journal.
func Verify(ctx context.Context, tp Toxiproxy, runID string) ([]Leftover, error) {
	if err := ValidRunID(runID); err != nil {
		return nil, fmt.Errorf("verify cleanup: %w", err)
	}
	return toxicsWithPrefix(ctx, tp, RunPrefix(runID))
}

// VerifyRun is [Verify] plus every journal entry of the run that was
// applied and never reverted (a proxy still disabled, a process group still
// stopped, a container still paused). Dependencies the run started
// (KindPostgres) are not faults and are stopped after this check, so they
// are never listed. tp may be nil when the run used no Toxiproxy; j may be
// nil.
func VerifyRun(ctx context.Context, tp Toxiproxy, runID string, j *Journal) ([]Leftover, error) {
	var left []Leftover
	var errs []error
	if tp != nil {
		l, err := Verify(ctx, tp, runID)
		left = append(left, l...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if j != nil {
		entries, err := ReadJournal(j.Path())
		if err != nil {
			errs = append(errs, err)
		}
		for _, e := range Pending(entries) {
			if e.Kind == KindToxic && tp != nil && e.Toxiproxy == tp.APIURL() {
				continue // read back from the server above
			}
			if e.Embedded {
				continue // the embedded server's state ends with the run
			}
			if e.Kind == KindPostgres {
				continue // a dependency, not a fault: stopped after this check
			}
			if e.Kind == KindCgroup || e.Kind == KindCompose || e.Kind == KindStandIn {
				continue // removed at teardown, once its processes are gone
			}
			left = append(left, leftoverOf(e))
		}
	}
	return left, errors.Join(errs...)
}

func leftoverOf(e Entry) Leftover {
	return Leftover{RunID: e.Run, Kind: e.Kind, Toxiproxy: e.Toxiproxy, Proxy: e.Proxy, Toxic: e.Toxic,
		PGID: e.PGID, Container: e.Container, Dependency: e.Dependency, Dir: e.Dir, Cgroup: e.Cgroup,
		Service: e.Service, Fault: e.Fault}
}

func toxicsWithPrefix(ctx context.Context, tp Toxiproxy, prefix string) ([]Leftover, error) {
	proxies, err := tp.Proxies(ctx)
	if err != nil {
		return nil, fmt.Errorf("read back proxies: %w", err)
	}
	var out []Leftover
	for name, p := range proxies {
		for _, t := range p.Toxics {
			if !strings.HasPrefix(t.Name, prefix) {
				continue
			}
			run, _ := RunOfToxic(t.Name)
			out = append(out, Leftover{RunID: run, Kind: KindToxic, Toxiproxy: tp.APIURL(), Proxy: name, Toxic: t.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.RunID != b.RunID {
			return a.RunID < b.RunID
		}
		if a.Proxy != b.Proxy {
			return a.Proxy < b.Proxy
		}
		return a.Toxic < b.Toxic
	})
	return out, nil
}

// CleanupCommand is the command that removes what run runID left at the
// Toxiproxy API url ("" for embedded or no Toxiproxy).
func CleanupCommand(runID, url string) string {
	cmd := "drill cleanup --run " + runID
	if url != "" {
		cmd += " --toxiproxy " + url
	}
	return cmd
}

// UnverifiedMessage is the exit-5 message: what is left (or why it could not
// be read) and the command that removes it. Example:
//
//	cleanup of run 20261130.075700.3fa2c1 could not be verified; still in effect:
//	  - toxic drill-20261130.075700.3fa2c1-pg-pause-up on proxy pg at http://toxiproxy:8474
//	remove with: drill cleanup --run 20261130.075700.3fa2c1 --toxiproxy http://toxiproxy:8474
func UnverifiedMessage(runID, url string, left []Leftover, readErr error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cleanup of run %s could not be verified", runID)
	if readErr != nil {
		fmt.Fprintf(&b, ": reading back failed: %v", readErr)
	}
	if len(left) > 0 {
		b.WriteString("; still in effect:")
		for _, l := range left {
			b.WriteString("\n  - " + l.String())
		}
	}
	b.WriteString("\nremove with: " + CleanupCommand(runID, url))
	return b.String()
}
