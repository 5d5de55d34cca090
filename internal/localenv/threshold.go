package localenv

// thresholds counts consecutive probe results the way the kubelet's probe
// worker does (pkg/kubelet/prober/worker.go doProbe): a result only takes
// effect once it has been seen successThreshold (success) or
// failureThreshold (failure) times in a row. The zero value with the two
// thresholds set is ready to use.
type thresholds struct {
	success, failure int
	last             int8 // 0 none yet, +1 success, -1 failure
	run              int
}

// observe records one result and reports whether it takes effect, i.e.
// whether the current run has reached its threshold. Once reached, every
// further equal result takes effect again (the kubelet sets the result on
// each probe past the threshold).
func (t *thresholds) observe(ok bool) bool {
	r := int8(-1)
	if ok {
		r = 1
	}
	if r == t.last {
		t.run++
	} else {
		t.last, t.run = r, 1
	}
	if ok {
		return t.run >= t.success
	}
	return t.run >= t.failure
}

// hold forgets the current run but keeps the last result, as the kubelet
// does after a liveness or startup result has taken effect (onHold,
// resultRun = 0).
func (t *thresholds) hold() { t.run = 0 }
