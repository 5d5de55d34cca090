// Package workers spreads a drill's load over N worker processes run as
// one Kubernetes Indexed Job, and brings their measurements back through
// the API server.
//
// Worker i of N (its Job completion index) runs the load engine with
// [load.Partition]{Index: i, Count: N}: of every stream's open-model
// schedule it sends the hits whose sequence number is i mod N, timed from
// the run's shared t=0, an absolute wall-clock time in its [Spec], so the
// workers together send exactly the one-process schedule. Latency counts
// from each hit's intended time, as in one process.
//
// A worker writes JSON lines on stdout, in the format of the seconds
// journal (internal/measure, [measure.ReadJournal]): every closed second of
// every stream as a "second" line (per-second HDR histograms and
// counters), and "worker" lines saying when it is ready, whether it started
// late, that it is alive (once a second) and when it is done.
//
// The coordinator ([Coordinator]) creates the Job (journaled before
// creation, deleted on every exit path, and by [Cleanup] after a killed
// run), follows each pod's log with client-go and merges the workers'
// seconds into one series per stream, each second handed on once every
// worker has reported it, exactly as one process's engine hands on its
// closed seconds. A worker that fails, disappears or stops reporting makes
// the run invalid: the coordinator's error wraps [ErrWorkerFailed] and
// names the worker and the second it stopped at.
package workers
