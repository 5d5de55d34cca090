package placement

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hierarchy is the cgroup hierarchy drill's CPU is controlled in.
type hierarchy struct {
	v2  bool
	dir string // drill's own cgroup directory in it
}

// discover finds the cgroup hierarchy with the cpu controller that holds
// drill (cgroup v1's cpu controller first: on a hybrid machine v2 rarely
// has it) from procSelf/mountinfo and procSelf/cgroup. Errors say why no
// usable one was found.
func discover(procSelf string) (hierarchy, error) {
	if procSelf == "" {
		procSelf = "/proc/self"
	}
	mounts, err := readMounts(filepath.Join(procSelf, "mountinfo"))
	if err != nil {
		return hierarchy{}, err
	}
	paths, err := readCgroups(filepath.Join(procSelf, "cgroup"))
	if err != nil {
		return hierarchy{}, err
	}
	for _, m := range mounts {
		if m.fstype != "cgroup" || !slices.Contains(m.opts, "cpu") {
			continue
		}
		for ctrls, path := range paths {
			if ctrls != "" && slices.Contains(strings.Split(ctrls, ","), "cpu") {
				return hierarchy{dir: join(m, path)}, nil
			}
		}
	}
	for _, m := range mounts {
		if m.fstype != "cgroup2" {
			continue
		}
		path, ok := paths[""]
		if !ok {
			break
		}
		dir := join(m, path)
		ctrls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return hierarchy{}, fmt.Errorf("read cgroup v2 controllers: %w", err)
		}
		if !slices.Contains(strings.Fields(string(ctrls)), "cpu") {
			return hierarchy{}, fmt.Errorf("the cpu controller is not enabled for drill's cgroup %s", dir)
		}
		return hierarchy{v2: true, dir: dir}, nil
	}
	return hierarchy{}, errors.New("no cgroup file system with the cpu controller is mounted")
}

// join is the directory of cgroup path in mount m.
func join(m mount, path string) string {
	rel, ok := strings.CutPrefix(path, m.root)
	if !ok {
		rel = path
	}
	return filepath.Join(m.point, rel)
}

type mount struct {
	root, point, fstype string
	opts                []string // super options
}

// readMounts reads the cgroup mounts of a mountinfo file.
func readMounts(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if sep < 5 || len(f) < sep+4 {
			continue
		}
		fstype := f[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		out = append(out, mount{root: unescape(f[3]), point: unescape(f[4]), fstype: fstype,
			opts: strings.Split(f[sep+3], ",")})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash.
func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// readCgroups maps each hierarchy's controllers ("" for v2) to drill's
// path in it, from a /proc/<pid>/cgroup file.
func readCgroups(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read drill's cgroups: %w", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out, nil
}

// enableCPU makes the cpu controller available to children of the v2
// cgroup dir (drill's own). The kernel refuses it (EBUSY) when dir holds
// processes and is not the root: then drill may not make a cgroup there.
func enableCPU(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("read cgroup v2 subtree controllers: %w", err)
	}
	if slices.Contains(strings.Fields(string(b)), "cpu") {
		return nil
	}
	return write(filepath.Join(dir, "cgroup.subtree_control"), "+cpu")
}
