// Package localenv is drill's local runtime: it runs the replicas of a
// service under test as local processes and applies the kubelet's probe
// semantics to them (docs/DESIGN.md §5), and it fronts them with a local
// Service proxy that routes only to ready replicas, as kube-proxy does with
// an EndpointSlice.
//
// The pieces, bottom up:
//
//   - [Replica] is one pod with one container: it starts the process (own
//     process group, $PORT, logs to a file and an in-memory ring), runs the
//     startup, liveness and readiness probes with the kubelet's worker
//     semantics, restarts the container on liveness/startup failure or exit
//     as its restartPolicy says (Always, OnFailure, Never) with the
//     kubelet's CrashLoopBackOff, and
//     reports every state change through [ReplicaConfig.OnChange] and as
//     events. It knows nothing about Services, so a kubelet-like node agent
//     can reuse it.
//   - [Service] runs N replicas named <service>-<i> and a reverse proxy that
//     balances round-robin across the ready ones (503 when none is). Replica
//     i gets its port in $PORT (or the variable and form
//     [ServiceSpec.PortEnv] and [ServiceSpec.PortFormat] name) and i in
//     $REPLICA_INDEX; a replica whose probes are refused while it listens
//     on other ports is named in a PortMismatch note event.
//   - A Service replays the controllers that replace pods: [Service.DeletePod]
//     deletes a pod as the API server does (a terminating endpoint, the
//     preStop sleep, SIGTERM and SIGKILL after the grace, or SIGKILL at
//     once) and starts its replacement in the same slot, as a ReplicaSet
//     does; [Service.Rollout] restarts every pod as a Deployment's rolling
//     update does (maxSurge, maxUnavailable, readiness-gated).
//   - [RunSetup] runs a service's one-shot setup step before its replicas.
//
// Every event goes to an [event.Sink] with a time on the run's
// [event.Clock], using the same kinds the Kubernetes observer produces:
// ProbeResult, PodStarted, PodReady, PodUnready, ContainerRestart,
// EndpointReady, EndpointNotReady, EndpointRemoved, PodCreated and
// PodDeleted (a replaced pod), K8sEvent for the kubelet's Killing, BackOff
// (CrashLoopBackOff) and Failed (a container that could not be started)
// events and the Deployment controller's ScalingReplicaSet (a rollout
// step), and a RolloutComplete Note.
//
// Every process the package starts, it reaps, on every exit path.
// Processes are started from one OS thread locked for the life of the
// Service with PR_SET_PDEATHSIG=SIGKILL, so even a drill killed with SIGKILL
// leaves no replica behind (their own children may escape if they leave the
// replica's process group).
package localenv
