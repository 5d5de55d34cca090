package workers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/workers"
	"github.com/drillhq/drill/internal/workers/workerstest"
)

// EnvTestKubeconfig names the kubeconfig of a throwaway control plane
// whose kube-controller-manager runs the Job controller (test/controlplane:
// controlplane up --controllers ...,job,ttl-after-finished). Unset: the
// tests against a real API server are skipped.
const EnvTestKubeconfig = "DRILL_TEST_KUBECONFIG"

// TestCoordinatorOnAPIServer: against a real kube-apiserver and Job
// controller (the test plays the kubelet, running each pod's worker
// in-process): the API server takes the Job and its Secret, the Job
// controller makes three pods with their completion indexes, the merged
// intended count equals the schedule, and the Job, its pods and Secret are
// gone afterwards; a killed worker makes the run invalid, naming it.
func TestCoordinatorOnAPIServer(t *testing.T) {
	path := os.Getenv(EnvTestKubeconfig)
	if path == "" {
		t.Skip("set " + EnvTestKubeconfig + " to the kubeconfig of a throwaway control plane with the Job controller")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		faults map[int]workerstest.Fault
	}{
		{"healthy", nil},
		{"killed", map[int]workerstest.Fault{1: workerstest.Killed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ns := fmt.Sprintf("drill-workers-%s-%d", tc.name, time.Now().UnixNano()%1e6)
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
			fc := workerstest.NewExternal(t, cs, ns, tc.faults)
			fc.Log = testLog(t)
			fc.BreakAfter = 2 * time.Second
			runCtx, stop := context.WithCancel(ctx)
			defer func() { stop(); fc.Wait() }()
			fc.Run(runCtx)
			spec := testSpec(stub(t), 3)
			// Time for the Job controller to make the pods and this test's
			// kubelet to start them (one API call after another).
			spec.Start = time.Now().Add(8 * time.Second)
			sink := &collectSink{}
			c := &workers.Coordinator{
				Client: cs, Job: workers.JobOptions{Namespace: ns, Image: "drill:test", Spec: spec},
				Sink: sink, Logs: fc.Logs, Poll: 100 * time.Millisecond,
				// Workers, test kubelet and control plane share this machine:
				// with 3 s (and the 5 s default) the run was judged stalled
				// here once the load began (a worker's lines ~7 s apart).
				StallAfter:   10 * time.Second,
				MaxStartLate: 500 * time.Millisecond, Log: testLog(t),
			}
			res, err := c.Run(runCtx)
			if tc.faults == nil {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				var intended int64
				for _, b := range sink.sb.Series()["orders"].Buckets {
					intended += b.Intended
				}
				if intended != 750 {
					t.Errorf("merged intended %d, want 750 (250/s for 3 s)", intended)
				}
				for _, w := range res.Workers {
					if !w.Done || !strings.HasPrefix(w.Pod, workers.JobName(spec.RunID)+"-"+fmt.Sprint(w.Index)+"-") {
						t.Errorf("worker %d: done %v, pod %q", w.Index, w.Done, w.Pod)
					}
				}
			} else {
				if !errors.Is(err, workers.ErrWorkerFailed) || exitcode.Code(err) != exitcode.InvalidMeasurement || !strings.Contains(err.Error(), "worker 1") {
					t.Fatalf("Run: %v, want an invalid run naming worker 1", err)
				}
			}
			sel := metav1.ListOptions{LabelSelector: workers.RunSelector(spec.RunID)}
			jobs, _ := cs.BatchV1().Jobs(ns).List(ctx, sel)
			pods, _ := cs.CoreV1().Pods(ns).List(ctx, sel)
			secrets, _ := cs.CoreV1().Secrets(ns).List(ctx, sel)
			if len(jobs.Items)+len(pods.Items)+len(secrets.Items) > 0 {
				t.Errorf("left behind %d jobs, %d pods, %d secrets", len(jobs.Items), len(pods.Items), len(secrets.Items))
			}
		})
	}
}
