package nodeagent

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// maxPods is the Node's pod capacity: the pod addresses of TEST-NET-1.
const maxPods = 253

// registerNode creates the Node (an existing one is kept) and reports it
// Ready.
func (a *Agent) registerNode(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.createNode(rctx); err != nil {
		return err
	}
	if err := a.updateNodeStatus(rctx, true); err != nil {
		return err
	}
	a.log.Info("node registered", "ip", a.cfg.NodeIP)
	return nil
}

// KubeletVersion is the kubeletVersion of the agent's Node
// (status.nodeInfo): what tells a run's reader that drill's node agent,
// not a kubelet, ran the pods.
const KubeletVersion = "drill-agent"

// nodeLabels are the labels of the agent's Node, as a kubelet sets its
// own, plus drill.dev/node-agent=true.
func (a *Agent) nodeLabels() map[string]string {
	return map[string]string{
		"kubernetes.io/hostname": a.cfg.Node,
		"kubernetes.io/os":       runtime.GOOS,
		"kubernetes.io/arch":     runtime.GOARCH,
		"drill.dev/node-agent":   "true",
	}
}

func (a *Agent) createNode(ctx context.Context) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Node, Labels: a.nodeLabels()}}
	_, err := a.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", a.cfg.Node, err)
	}
	return nil
}

// updateNodeStatus writes the Node's conditions (Ready as given; no
// pressure), addresses, capacity and info, with a fresh heartbeat time.
func (a *Agent) updateNodeStatus(ctx context.Context, ready bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if err := a.createNode(ctx); err != nil {
				return err
			}
			n, err = a.cs.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		now := metav1.Now()
		cond := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
			c := corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
			for _, o := range n.Status.Conditions {
				if o.Type == t && o.Status == status {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
			return c
		}
		readyCond := cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "drill node agent is posting ready status")
		if !ready {
			readyCond = cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", "drill node agent stopped")
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods:   resource.MustParse(strconv.Itoa(maxPods)),
		}
		n.Status.Conditions = []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
			readyCond,
		}
		// The Hostname address is the host of the agent's kubelet API:
		// kube-apiserver dials it (with DaemonEndpoints' port) for
		// pods/log, trying Hostname first by default. The InternalIP is
		// the pods' hostIP, never dialled.
		host, port := a.kubeletEndpoint()
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: a.cfg.NodeIP},
			{Type: corev1.NodeHostName, Address: host},
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity
		n.Status.NodeInfo.OperatingSystem = runtime.GOOS
		n.Status.NodeInfo.Architecture = runtime.GOARCH
		n.Status.NodeInfo.KubeletVersion = KubeletVersion
		n.Status.NodeInfo.ContainerRuntimeVersion = "drill://local-processes"
		_, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update status of node %s: %w", a.cfg.Node, err)
	}
	return nil
}

// heartbeat refreshes the Node's status every HeartbeatPeriod until ctx
// ends; failures (API server down) are logged and tried again next time.
func (a *Agent) heartbeat(ctx context.Context) {
	t := time.NewTicker(a.cfg.HeartbeatPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatPeriod)
		if err := a.updateNodeStatus(hctx, true); err != nil && ctx.Err() == nil {
			a.log.Debug("node heartbeat", "err", err)
		}
		cancel()
	}
}
