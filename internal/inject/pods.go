package inject

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/localenv"
	"github.com/drillhq/drill/internal/proctree"
	"github.com/drillhq/drill/internal/scenario"
)

// PodSet is a local service whose pods the pod-kill and rollout faults
// end: [localenv.Service] is one.
type PodSet interface {
	// Declared is the replica count the service keeps.
	Declared() int
	// LivePods are the pods not being deleted, in slot order.
	LivePods() []string
	// Status is every pod's status, those being deleted included.
	Status() []localenv.ReplicaStatus
	// DeletePod deletes a pod and starts its replacement in its slot
	// (see [localenv.Service.DeletePod]).
	DeletePod(name string, o localenv.DeleteOptions, fault string) (replacement string, err error)
	// WaitGone waits until the named pods' processes are reaped.
	WaitGone(ctx context.Context, names ...string) error
	// Rollout restarts every pod as a Deployment's rolling update does
	// (see [localenv.Service.Rollout]).
	Rollout(ctx context.Context, o localenv.RolloutOptions) error
}

var _ PodSet = (*localenv.Service)(nil)

// KindLocalPods is a pod-kill or rollout fault on a local service: the
// service's pods and their processes when the fault began (Procs, with
// start times), the pods it ended (Pods) and its declared replica count
// (Replicas). A local service's replicas end with the run's drill process
// (each is its child with a parent-death signal), so a run killed
// mid-fault leaves no pod to restore: `drill cleanup` ends any journaled
// process still the same one (a replica that outlived drill) and says
// that the service's declared replicas start with its next run.
const KindLocalPods = "local-pods"

// podsEntry is the journal entry of fault on service, listing the
// processes of every pod of pods.
func podsEntry(op, fault, service string, declared int, ended []string, pods []localenv.ReplicaStatus, seed *int64) Entry {
	var pids []int
	for _, p := range pods {
		if p.PID > 0 {
			pids = append(pids, p.PID)
		}
	}
	e := Entry{Op: op, Key: KindLocalPods + "/" + service + "/" + fault, Kind: KindLocalPods, Fault: fault,
		Service: service, Replicas: declared, Pods: ended, Seed: seed}
	if op == OpApply {
		e.Procs = proctree.IDs(pids)
	}
	return e
}

// undoLocalPods is [Cleanup]'s work for a [KindLocalPods] entry: it ends
// each journaled process that is still the same one (SIGKILL to its
// process group, which a replica leads), and says why the service is not
// brought back to its declared replicas here.
func undoLocalPods(ctx context.Context, e Entry) (detail string, gone bool, err error) {
	var ended []int
	for _, id := range e.Procs {
		if !proctree.Same(id) {
			continue
		}
		if err := syscall.Kill(-id.PID, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			if err := syscall.Kill(id.PID, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
				return "", false, fmt.Errorf("end pod process %d of service %s: %w", id.PID, e.Service, err)
			}
		}
		ended = append(ended, id.PID)
	}
	for _, pid := range ended {
		for proctree.Alive(pid) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	why := fmt.Sprintf("the local service %s ended with its run (its pods are drill's children); "+
		"nothing to restore: its %d declared replicas start with the next run", e.Service, e.Replicas)
	if len(ended) == 0 {
		return why, true, nil
	}
	return fmt.Sprintf("ended pod processes %v that outlived the run (SIGKILL); %s", ended, why), false, nil
}

// podsDescribe renders the pods of a Describe line.
func podsDescribe(pods []string) string {
	s := append([]string(nil), pods...)
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// choiceDescribe says which of a service's noun (pods, containers) a
// pod-kill fault f ends: the named ones, a percentage or a count chosen at
// random with seed.
func choiceDescribe(f scenario.Fault, seed *int64, noun string) string {
	switch {
	case len(f.Pods) > 0:
		return noun + "s " + podsDescribe(f.Pods)
	case f.Percent != nil:
		return fmt.Sprintf("%d%% of the %ss, at random (seed %d)", *f.Percent, noun, *seed)
	default:
		return fmt.Sprintf("%d %s(s), at random (seed %d)", *f.Count, noun, *seed)
	}
}
