package localenv

import "time"

// Kubelet CrashLoopBackOff defaults (pkg/kubelet/kubelet.go backOffPeriod,
// MaxContainerBackOff; client-go flowcontrol.Backoff expiry 2 x max).
const (
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffMax  = 5 * time.Minute
)

// backoff is the kubelet's per-container restart back-off
// (k8s.io/client-go/util/flowcontrol.Backoff as used by
// kuberuntime.doBackOff), without jitter, for one container.
//
// A restart is checked against ref, the finish time of the container's
// latest exited instance as the kubelet sees it when it decides to start the
// container again: for a process that exited by itself that is its own exit;
// for a container killed by a liveness or startup probe it is the exit of the
// instance before (the kubelet kills and starts in one sync, with the pod
// status read before the kill), or none on the first kill. With no ref the
// container starts at once and the back-off is not advanced.
type backoff struct {
	base, max time.Duration
	// expire: a ref more than this long after the last restart resets the
	// back-off (flowcontrol: 2 x max, i.e. 10 min of running).
	expire time.Duration

	has        bool
	cur        time.Duration
	lastUpdate time.Time
}

// wait returns how long after now the container may start again.
func (b *backoff) wait(now, ref time.Time) time.Duration {
	if ref.IsZero() || !b.has || ref.Sub(b.lastUpdate) > b.expire {
		return 0
	}
	return max(0, b.cur-now.Sub(ref))
}

// next records a restart at now that passed the check (flowcontrol Next):
// the first delay is base, then it doubles up to max; an expired entry
// starts again at base.
func (b *backoff) next(now, ref time.Time) {
	if ref.IsZero() {
		return
	}
	if !b.has || ref.Sub(b.lastUpdate) > b.expire {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	b.has = true
	b.lastUpdate = now
}

// current is the delay the next restart in a crash loop will wait (0 before
// the first restart).
func (b *backoff) current() time.Duration {
	if !b.has {
		return 0
	}
	return b.cur
}
