package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drillhq/drill/internal/inject"
)

// onlyFault keeps the fault named name of the scenario's faults, starting
// at at.
func onlyFault(t *testing.T, name, at string) func(root *yaml.Node) {
	return func(root *yaml.Node) {
		faults := getYAML(t, root, "faults")
		var keep []*yaml.Node
		for _, f := range faults.Content {
			for i := 0; i+1 < len(f.Content); i += 2 {
				if f.Content[i].Value == "name" && f.Content[i+1].Value == name {
					keep = append(keep, f)
				}
			}
		}
		if len(keep) != 1 {
			t.Fatalf("the scenario has %d faults named %s", len(keep), name)
		}
		faults.Content = keep
		setYAML(t, root, "faults.0.at", at)
	}
}

// TestPlatformFaultCleanupAfterSIGKILL: drill is killed with SIGKILL in
// the middle of a rollout whose strategy it changed (maxSurge 1,
// maxUnavailable 0 for the rollout only), and in the middle of a drain
// whose node it cordoned. `drill cleanup --run` then puts the Deployment's
// own strategy back (the restart itself cannot be undone: the Deployment
// controller finishes it) and uncordons the node; a second cleanup has
// nothing left to do, and the Deployment is back to its 3 declared
// replicas, all available, not paused.
func TestPlatformFaultCleanupAfterSIGKILL(t *testing.T) {
	e := requireEnv(t)
	e.apply(t, "order-gateway.yaml")
	w := startWatch(t, e.cs, namespace, "app=order-gateway", "order-gateway")
	w.waitReady(t, 3, 3*time.Minute)

	for _, tc := range []struct {
		fault string
		// begun reports whether the fault has done what cleanup must undo.
		begun func(ctx context.Context) (bool, error)
	}{
		{"roll", func(ctx context.Context) (bool, error) {
			d, err := e.cs.AppsV1().Deployments(namespace).Get(ctx, "order-gateway", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ru := d.Spec.Strategy.RollingUpdate
			changed := ru != nil && ru.MaxUnavailable != nil && *ru.MaxUnavailable == intstr.FromInt32(0)
			return changed && d.Spec.Template.Annotations[inject.RestartedAtAnnotation] != "", nil
		}},
		{"drain-node", func(ctx context.Context) (bool, error) {
			n, err := e.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return n.Spec.Unschedulable, nil
		}},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			sc := e.scenario(t, "orders-platform-faults.yaml", onlyFault(t, tc.fault, "5s"))
			runID := inject.NewRunID(time.Now())
			p, r := e.startDrill(t, "--run-id", runID, "--kubeconfig", e.kubeconfig, "--context", contextName, sc)
			state := filepath.Join(filepath.Dir(r.out), "state")

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for {
				ok, err := tc.begun(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					break
				}
				if !p.running() || ctx.Err() != nil {
					t.Fatalf("%s never began (drill running: %t):\n%s", tc.fault, p.running(), p.tail(30))
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.exited
			t.Logf("drill killed with SIGKILL while %s was on", tc.fault)

			cleanup := func() (int, string) {
				cmd := exec.Command(e.drill, "cleanup", "--run", runID, "--state-dir", state)
				out, err := cmd.CombinedOutput()
				code := 0
				if err != nil {
					ee, ok := err.(*exec.ExitError)
					if !ok {
						t.Fatalf("drill cleanup: %v", err)
					}
					code = ee.ExitCode()
				}
				return code, string(out)
			}
			code, out := cleanup()
			t.Logf("drill cleanup: exit %d\n%s", code, out)
			if code != 0 {
				t.Fatalf("drill cleanup exit %d, want 0:\n%s", code, out)
			}
			if code, out := cleanup(); code != 0 || !strings.Contains(out, "nothing to clean up") {
				t.Errorf("a second drill cleanup: exit %d, want 0 and nothing to clean up:\n%s", code, out)
			}

			n, err := e.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable {
				t.Errorf("node %s still cordoned after drill cleanup", nodeName)
			}
			wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer wcancel()
			for {
				d, err := e.cs.AppsV1().Deployments(namespace).Get(wctx, "order-gateway", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ru := d.Spec.Strategy.RollingUpdate
				if ru == nil || ru.MaxSurge == nil || ru.MaxUnavailable == nil ||
					*ru.MaxSurge != intstr.FromString("25%") || *ru.MaxUnavailable != intstr.FromString("25%") {
					t.Fatalf("the Deployment's strategy after drill cleanup: %+v, want its own 25%%/25%%", d.Spec.Strategy)
				}
				if d.Spec.Paused {
					t.Fatal("the Deployment's rollout is paused after drill cleanup")
				}
				done, msg, err := inject.RolloutStatus(d)
				if err != nil {
					t.Fatal(err)
				}
				if done && d.Status.AvailableReplicas == 3 && d.Status.Replicas == 3 {
					break
				}
				if wctx.Err() != nil {
					t.Fatalf("the Deployment is not back to 3 available replicas after drill cleanup: %s (status %+v)", msg, d.Status)
				}
				time.Sleep(500 * time.Millisecond)
			}
			w.waitReady(t, 3, 3*time.Minute)
		})
	}
}
