// Package cluster proves drill's kubernetes mode against a real Kubernetes
// control plane on one machine: kube-apiserver and
// kube-controller-manager v1.37.2 with embedded etcd (test/controlplane),
// two nodes on it, a throwaway PostgreSQL, a toxiproxy-server reached
// through its HTTP API (its proxy listens on the pod bridge's gateway
// address), and `drill run --kubeconfig ... --context ...` on
// scenarios/k8s; and `drill load` on 3 load workers, an Indexed Job the
// real Job controller makes and the agent runs, with the workers' logs
// read through the API server.
//
// The nodes: drill-kubelet, a real one (test/node: the kubelet, kube-proxy
// in iptables mode and kube-scheduler, a containerd of its own, CNI bridge
// pod IPs), tainted so that only pods made for it land there
// (applyKubelet), which runs the orders pair (TestCorrectBuild,
// TestNaiveBuild) and the probe tutorial's pair (TestProbeTutorial, 6
// replicas): the kubelet's probes and liveness kills, the load through the
// Service's ClusterIP; and drill-node, `drill agent`, which runs the
// other tests' pods as local processes. Where the real node cannot run (a
// part missing, e.g. containerd or the CNI plugins), its tests skip saying
// which (fail under CI=true) and the agent's still run.
//
// The package holds only tests. The first test to run builds drill, the
// toxiproxy-server and the control plane's CLI (the first build of
// kube-apiserver takes 10-20 minutes; the Go build cache makes later ones a
// few seconds) and starts everything once; TestMain stops and removes
// everything at the end. Run it with a generous timeout:
//
//	nice -n 10 go test -timeout 30m -count=1 -v ./test/cluster/
//
// -short skips it. It is skipped, saying why, only when the control plane
// cannot be built (no go command) or PostgreSQL's binaries are missing.
// DRILL_CLUSTER_KEEP=1 keeps the temp dir (the agent's and the pods' logs)
// after the run.
package cluster
