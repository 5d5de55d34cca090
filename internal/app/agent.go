package app

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/kube"
	"github.com/drillhq/drill/internal/nodeagent"
)

// agentFlags are the flags of `drill agent`.
type agentFlags struct {
	node     string
	services []string
	logDir   string
	kubelet  string
	lag      time.Duration
}

// newAgentCommand is `drill agent`: the node agent (internal/nodeagent),
// the local runtime in the kubelet's role for a control plane without
// kubelets.
func newAgentCommand(g *Globals) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent --node NAME [--service [NS/]NAME=HOST:PORT]...",
		Short: "Run the pods bound to a node as local processes (a kubelet for a control plane without nodes)",
		Long: `agent plays the kubelet for a Kubernetes API server that has no nodes, such as
drill's test control plane (test/controlplane): it registers the Node --node
(Ready, InternalIP 192.0.2.1), binds every Pending pod without a node to it
(there is no scheduler), and runs each pod bound to it as a local process:
the container's command and args are the argv ("drill" or "/drill" as argv[0]
means this drill), its env (value, fieldRef, secretKeyRef, configMapKeyRef)
plus PORT, a free loopback port the process must listen on, and its probes
with the kubelet's semantics. It writes each pod's status as the kubelet does
(phase, a pod IP 192.0.2.x, conditions, containerStatuses with restartCount
and lastState) and deletes a deleted pod once its process has stopped. A pod whose
restartPolicy is Never or OnFailure (a Job's) ends Succeeded or Failed when its
container exits and is not restarted, so the Job controller counts it.

It serves the kubelet's containerLogs endpoint (HTTPS, a self-signed
certificate) on --kubelet-listen and reports that host as the Node's Hostname
address and the port as its kubelet endpoint, so kubectl logs (-f) and drill's
load-worker coordinator read a pod's output through the API server. The API
server must reach that address (the default is loopback: an API server on this
machine) and must not verify the kubelet's certificate
(--kubelet-certificate-authority unset). The endpoint takes no credentials;
keep it on loopback or a network only the API server reaches.

Each --service gets a local Service proxy on HOST:PORT (port 0: a free port,
printed at start) that routes, like kube-proxy, to the ready endpoints of the
Service's EndpointSlices, mapping each pod IP to that pod's loopback port.
Namespace defaults to -n, else the context's namespace. A pod being deleted
stays routed as before for --endpoint-lag after its deletion began (default
1s; 0s: the proxy follows the EndpointSlices at once), while its preStop sleep
and SIGTERM start at once, as kube-proxy learns of a deletion only after the
EndpointSlice controller and its own sync: a pod that exits at once on SIGTERM
fails the requests still routed to it, as on a cluster.

A deleted pod's container gets the kubelet's sequence: a Killing Event, its
preStop hook (a sleep action, or an exec hook that only sleeps; a pod with any
other preStop hook is not run), SIGTERM, SIGKILL once the deletion's grace
period is over.

Scope: all namespaces, or only -n/--namespace when given. Pods need exactly
one container and no init containers. SIGINT or SIGTERM stops every pod
(SIGTERM, SIGKILL after its grace period; a second signal kills at once).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAgent(cmd, g, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.node, "node", "", "the Node's name (required)")
	fs.StringArrayVar(&f.services, "service", nil, "route a Service: [NAMESPACE/]NAME=HOST:PORT (repeatable)")
	fs.StringVar(&f.logDir, "log-dir", "", "directory for the pods' logs, <namespace>_<pod>.log (default: a temporary directory removed at exit)")
	fs.DurationVar(&f.lag, "endpoint-lag", nodeagent.DefaultEndpointLag, "how long a Service keeps routing to a pod being deleted (kube-proxy's sync lag); 0s: none")
	fs.StringVar(&f.kubelet, "kubelet-listen", nodeagent.DefaultKubeletListen, "HOST:PORT of the kubelet API (pod logs) the API server dials; port 0: a free port")
	return cmd
}

func runAgent(cmd *cobra.Command, g *Globals, f agentFlags) error {
	bad := func(format string, a ...any) error {
		return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("drill agent: "+format, a...))
	}
	if f.node == "" {
		return bad("--node is required")
	}
	if errs := validation.IsDNS1123Subdomain(f.node); len(errs) > 0 {
		return bad("--node %q: %s", f.node, strings.Join(errs, "; "))
	}
	if f.lag < 0 || f.lag > 10*time.Second {
		return bad("--endpoint-lag %s: must be between 0s and 10s", f.lag)
	}
	lag := f.lag
	if lag == 0 {
		lag = -1 // nodeagent.Config: negative means none
	}
	cfg, err := kube.Load(g.Kubeconfig, g.Context, g.Namespace)
	if err != nil {
		return bad("kubeconfig: %w", err)
	}
	routes, err := parseServiceRoutes(f.services, cfg.Namespace)
	if err != nil {
		return bad("%w", err)
	}
	cs, err := cfg.Clientset()
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill agent: %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill agent: find the drill executable: %w", err))
	}
	agent, err := nodeagent.New(nodeagent.Config{
		Client: cs, Node: f.node, Namespace: g.Namespace, Services: routes,
		Executable: exe, LogDir: f.logDir, KubeletListen: f.kubelet, EndpointLag: lag, APIServer: apiHostPort(cfg.Rest.Host), Log: g.Logger.With("component", "agent"),
	})
	if err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, err)
	}
	urls := agent.ServiceURLs()
	names := make([]string, 0, len(urls))
	for n := range urls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(g.Stdout, "service %s: %s\n", n, urls[n])
	}
	fmt.Fprintf(g.Stdout, "node %s: context %s, namespace %s, kubelet API %s\n", f.node, cfg.Context, scope(g.Namespace), agent.KubeletURL())
	if err := agent.Run(cmd.Context(), g.Hard); err != nil {
		return exitcode.Wrap(exitcode.CouldNotRun, fmt.Errorf("drill agent: %w", err))
	}
	return nil
}

// apiHostPort is host:port of a rest.Config Host (a URL or host:port);
// "" when it has no port and no https/http scheme to imply one.
func apiHostPort(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		if _, _, err := net.SplitHostPort(host); err == nil {
			return host
		}
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	switch u.Scheme {
	case "https":
		return net.JoinHostPort(u.Hostname(), "443")
	case "http":
		return net.JoinHostPort(u.Hostname(), "80")
	}
	return ""
}

func scope(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}

// parseServiceRoutes parses --service values, [NAMESPACE/]NAME=HOST:PORT,
// with defNS for a missing namespace.
func parseServiceRoutes(vals []string, defNS string) ([]nodeagent.ServiceRoute, error) {
	var out []nodeagent.ServiceRoute
	for _, v := range vals {
		name, listen, ok := strings.Cut(v, "=")
		if !ok || name == "" || listen == "" {
			return nil, fmt.Errorf("--service %q: want [NAMESPACE/]NAME=HOST:PORT", v)
		}
		ns := defNS
		if n, s, ok := strings.Cut(name, "/"); ok {
			ns, name = n, s
		}
		for _, part := range []string{ns, name} {
			if errs := validation.IsDNS1123Label(part); len(errs) > 0 {
				return nil, fmt.Errorf("--service %q: %q: %s", v, part, strings.Join(errs, "; "))
			}
		}
		if !strings.Contains(listen, ":") {
			return nil, fmt.Errorf("--service %q: listen address %q is not HOST:PORT", v, listen)
		}
		out = append(out, nodeagent.ServiceRoute{Namespace: ns, Name: name, Listen: listen})
	}
	return out, nil
}
