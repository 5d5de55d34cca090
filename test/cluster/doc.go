// Package cluster proves drill's kubernetes mode against a real Kubernetes
// control plane on one machine: kube-apiserver and
// kube-controller-manager v1.37.2 with embedded etcd (test/controlplane),
// `drill agent` in the kubelet's role, a throwaway PostgreSQL, a
// toxiproxy-server reached through its HTTP API, and `drill run
// --kubeconfig ... --context ...` on scenarios/k8s; and `drill load` on 3
// load workers, an Indexed Job the real Job controller makes and the agent
// runs, with the workers' logs read through the API server.
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
