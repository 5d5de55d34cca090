package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a node leaves on the machine besides its temp dir, each named so
// that a later Start (or Stop) finds it:
//
//   - processes whose command line names the node's dir (the kubelet,
//     containerd, its shims, kube-proxy, kube-scheduler), and the pods'
//     processes, all in cgroups under the node's cgroup root;
//   - mounts under the node's dir (overlay root filesystems, shm, network
//     namespaces: containerd keeps them under its state dir here, the
//     kubelet's volumes);
//   - the shims' sockets in ShimSocketDir (named in each task's bundle)
//     and the sandboxes' cached CNI results in CNICacheDir;
//   - the kubelet's links to the containers' logs in ContainerLogLinks and
//     its device plugin socket (DevicePluginsSocket);
//   - the bridge BridgeName and the veths attached to it;
//   - iptables chains named KUBE-* (the kubelet's canaries, kube-proxy's
//     rules), in the filter, nat and mangle tables;
//   - cgroup directories named after the node's dir, one per cgroup v1
//     hierarchy (or one in the v2 tree);
//   - three kernel settings the kubelet changes (kernel.panic,
//     kernel.panic_on_oops, vm.overcommit_memory), saved before start in
//     sysctls.json and put back.
const (
	// DirPrefix starts the base name of every node's temp dir (under
	// os.TempDir()) and of its cgroup root.
	DirPrefix = "drill-node-"
	// BridgeName is the CNI bridge of the node (at most 15 bytes, a
	// Linux interface name).
	BridgeName = "drillnode0"
	// lockPath serializes nodes on this machine: one at a time, since
	// the KUBE-* chains are machine-wide.
	lockPath = "/run/drill-node.lock"
)

// kernelSettings are the sysctls the kubelet sets on start
// (protectKernelDefaults false), saved and restored by the node.
var kernelSettings = []string{"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory"}

// saveSysctls writes the current values of kernelSettings to
// dir/sysctls.json.
func saveSysctls(dir string) error {
	vals := map[string]string{}
	for _, k := range kernelSettings {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("save sysctl %s: %w", k, err)
		}
		vals[k] = strings.TrimSpace(string(b))
	}
	b, _ := json.Marshal(vals)
	return os.WriteFile(filepath.Join(dir, "sysctls.json"), b, 0o644)
}

// restoreSysctls writes back what saveSysctls saved in dir (nothing when
// the file is missing).
func restoreSysctls(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "sysctls.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	vals := map[string]string{}
	if err := json.Unmarshal(b, &vals); err != nil {
		return fmt.Errorf("read %s/sysctls.json: %w", dir, err)
	}
	var errs []error
	for k, v := range vals {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs returns the directories of the cgroup named name (a base name
// like "drill-node-123") in every mounted hierarchy: one per cgroup v1
// controller mount (the named "systemd" hierarchy included), or the one
// directory of a cgroup v2 tree.
func cgroupDirs(name string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: ... mountpoint ... - fstype source options
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fs := fields[sep+1]; fs == "cgroup" || fs == "cgroup2" {
			out = append(out, filepath.Join(unescapeMount(fields[4]), name))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// killCgroupProcs SIGKILLs every process in the cgroup trees dirs until
// they are empty or 10 s pass.
func killCgroupProcs(dirs []string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						n++
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill pods' processes: %d still in %s after 10 s", n, strings.Join(dirs, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes the cgroup trees dirs, deepest first.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		var sub []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				sub = append(sub, p)
			}
			return nil
		})
		sort.Slice(sub, func(i, j int) bool { return len(sub[i]) > len(sub[j]) })
		for _, s := range sub {
			var err error
			for range 50 { // a cgroup is busy a moment after its last process died
				if err = syscall.Rmdir(s); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", s, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killByCmdline SIGKILLs every process whose command line contains s (the
// node's dir: its kubelet, containerd, shims, kube-proxy and scheduler all
// name a file in it) and waits up to 10 s for them to go.
func killByCmdline(s string) error {
	self := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(b), s) {
				continue
			}
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i:]), ") Z") {
				continue // a zombie: its parent reaps it
			}
			left = append(left, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes naming %s still alive 10 s after SIGKILL: %v", s, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unmountUnder detaches every mount at or under dir, deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	var errs []error
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder counts the mounts at or under dir.
func mountsUnder(dir string) int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 {
			if mp := unescapeMount(f[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
				n++
			}
		}
	}
	return n
}

// removeBridge deletes the veths attached to BridgeName, then the bridge
// (nothing when it does not exist).
func removeBridge(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", BridgeName)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ents, _ := os.ReadDir(filepath.Join("/sys/class/net", BridgeName, "brif"))
	var errs []error
	for _, e := range ents {
		// A veth goes by itself when its pod's network namespace is
		// freed, which may happen between the listing and the delete.
		if _, err := run(ctx, "ip", "link", "del", e.Name()); err != nil && linkExists(e.Name()) {
			errs = append(errs, err)
		}
	}
	if _, err := run(ctx, "ip", "link", "del", BridgeName); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// linkExists reports whether the network interface name exists.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// ShimSocketDir is where containerd 1.6's shims put their sockets
// whatever the daemon's state dir (a path fixed in that release); a shim
// that is SIGKILLed leaves its socket there.
const ShimSocketDir = "/run/containerd/s"

// removeShimSockets removes the sockets of the node's shims from
// ShimSocketDir: each task's bundle under containerd's state dir holds an
// "address" file naming its shim's socket ("unix:///run/containerd/s/<hash>").
func removeShimSockets(dir string) error {
	bundles, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	var errs []error
	for _, f := range bundles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sock := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
		if filepath.Dir(sock) != ShimSocketDir {
			continue
		}
		if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove shim socket: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CNICacheDir is where libcni, inside containerd 1.6's CRI plugin, caches
// each attachment's result as <network>-<sandbox id>-<interface>; the
// entry goes only when the network is torn down, which a killed node never
// does (the loopback network's entries stay even after a clean stop).
const CNICacheDir = "/var/lib/cni/results"

// removeCNICache removes the cached CNI results of the node's sandboxes,
// found by the sandbox ids in containerd's state dir.
func removeCNICache(dir string) error {
	ids, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.grpc.v1.cri", "sandboxes", "*"))
	tasks, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*"))
	var errs []error
	for _, p := range append(ids, tasks...) {
		id := filepath.Base(p)
		if len(id) < 32 { // a sandbox id is 64 hex digits; never match broadly
			continue
		}
		m, _ := filepath.Glob(filepath.Join(CNICacheDir, "*-"+id+"-*"))
		for _, f := range m {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cached CNI result: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Paths the kubelet v1.37.2 uses whatever its --root-dir: the symlinks to
// containers' logs, and the device manager's socket.
const (
	ContainerLogLinks   = "/var/log/containers"
	DevicePluginsSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"
)

// removeKubeletHostFiles removes the symlinks in ContainerLogLinks that
// point into dir, and DevicePluginsSocket when nothing listens on it (a
// killed kubelet's).
func removeKubeletHostFiles(dir string) error {
	var errs []error
	ents, _ := os.ReadDir(ContainerLogLinks)
	for _, e := range ents {
		p := filepath.Join(ContainerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove log link: %w", err))
			}
		}
	}
	if st, err := os.Stat(DevicePluginsSocket); err == nil && st.Mode()&os.ModeSocket != 0 {
		c, err := net.DialTimeout("unix", DevicePluginsSocket, time.Second)
		if err == nil {
			c.Close() // a kubelet listens: not ours to remove
		} else if err := os.Remove(DevicePluginsSocket); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove the kubelet's device plugin socket: %w", err))
		}
	}
	return errors.Join(errs...)
}

// iptablesTools are the (save, restore) commands whose tables are checked
// and cleaned: both address families, and the legacy back end where it is
// installed beside nf_tables.
var iptablesTools = [][2]string{
	{"iptables-save", "iptables-restore"},
	{"ip6tables-save", "ip6tables-restore"},
	{"iptables-legacy-save", "iptables-legacy-restore"},
	{"ip6tables-legacy-save", "ip6tables-legacy-restore"},
}

// kubeChains returns, per save command, the KUBE-* chains of every table
// as "table/chain".
func kubeChains(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	for _, t := range iptablesTools {
		if _, err := exec.LookPath(t[0]); err != nil {
			continue
		}
		dump, err := exec.CommandContext(ctx, t[0]).Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t[0], err)
		}
		table := ""
		for _, line := range strings.Split(string(dump), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":KUBE-"):
				name, _, _ := strings.Cut(line[1:], " ")
				out[t[0]] = append(out[t[0]], table+"/"+name)
			}
		}
	}
	return out, nil
}

// removeKubeChains deletes every rule that jumps to a KUBE-* chain and
// then every KUBE-* chain, in every table of every iptablesTools back
// end, through iptables-restore --noflush (which parses the rules'
// quoting as iptables-save wrote it).
func removeKubeChains(ctx context.Context) error {
	var errs []error
	for _, t := range iptablesTools {
		if _, err := exec.LookPath(t[0]); err != nil {
			continue
		}
		dump, err := exec.CommandContext(ctx, t[0]).Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t[0], err))
			continue
		}
		var script strings.Builder
		var chains []string
		flush := func() {
			for _, c := range chains {
				fmt.Fprintf(&script, "-F %s\n", c)
			}
			for _, c := range chains {
				fmt.Fprintf(&script, "-X %s\n", c)
			}
			chains = nil
		}
		touched := false
		for _, line := range strings.Split(string(dump), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				script.WriteString(line + "\n")
			case strings.HasPrefix(line, ":KUBE-"):
				name, _, _ := strings.Cut(line[1:], " ")
				chains = append(chains, name)
				touched = true
			case strings.HasPrefix(line, "-A ") && !strings.HasPrefix(line, "-A KUBE-") && strings.Contains(line, " KUBE-"):
				script.WriteString("-D " + line[3:] + "\n")
			case line == "COMMIT":
				flush()
				script.WriteString("COMMIT\n")
			}
		}
		if !touched {
			continue
		}
		cmd := exec.CommandContext(ctx, t[1], "--noflush")
		cmd.Stdin = strings.NewReader(script.String())
		if b, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s --noflush: %w: %s", t[1], err, tail(string(b), 1500)))
		}
	}
	return errors.Join(errs...)
}

// sweepDir removes everything a node with temp dir dir left on the
// machine (see the list above), whether it stopped or its test was
// SIGKILLed, and then dir itself. It keeps going after an error and
// returns them all.
func sweepDir(ctx context.Context, dir string) error {
	var errs []error
	cgs, err := cgroupDirs(filepath.Base(dir))
	if err != nil {
		errs = append(errs, err)
	}
	// The kubelet first (it would restart containers), then the pods'
	// processes, then the shims and containerd: all of them are caught by
	// the two kills.
	if err := killByCmdline(dir); err != nil {
		errs = append(errs, err)
	}
	if err := killCgroupProcs(cgs); err != nil {
		errs = append(errs, err)
	}
	if err := killByCmdline(dir); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeShimSockets(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCNICache(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeKubeletHostFiles(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeBridge(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := removeKubeChains(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(cgs); err != nil {
		errs = append(errs, err)
	}
	if err := restoreSysctls(dir); err != nil {
		errs = append(errs, err)
	}
	if n := mountsUnder(dir); n > 0 {
		errs = append(errs, fmt.Errorf("%d mounts still under %s: not removing it", n, dir))
	} else if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

// staleDirs returns the temp dirs of earlier nodes on this machine.
func staleDirs() []string {
	m, _ := filepath.Glob(filepath.Join(os.TempDir(), DirPrefix+"*"))
	return m
}
