package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tsvHeader is the header of reports/fidelity-runs.tsv: one row per run,
// with what the figures depend on (the build, the guest's kind, the cost
// of a system call on it), whether the verdict was right (1 or 0: the
// exit code and exactly the declared assertions failed) and the
// assertions that failed (comma-separated, empty for none). Rows written
// before the last two columns existed end after getppid_ns.
const tsvHeader = "ended_utc\tcommit\tround\tdrill\texit\tlate_share\tlag_p99\tguest\tgetppid_ns\tright\tfailed"

// machine is what every row of a sitting records about the machine.
type machine struct {
	// Guest is the hypervisor the kernel detected ("KVM", "PVM"), or
	// "none" on bare metal, "unknown" when the kernel log cannot be read.
	Guest string
	// Getppid is the cost of one getppid system call (ns), the median of
	// a few timed batches: a guest that traps system calls (PVM) pays
	// several times more than one that does not.
	Getppid float64
}

// readMachine detects the guest's kind from the kernel log and times
// getppid.
func readMachine() machine {
	return machine{Guest: guestKind(), Getppid: getppidCost()}
}

// guestKind reads "Hypervisor detected: X" from dmesg.
func guestKind() string {
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		return "unknown"
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if _, kind, ok := strings.Cut(sc.Text(), "Hypervisor detected: "); ok {
			return strings.TrimSpace(kind)
		}
	}
	return "none"
}

// getppidCost is the median ns of one getppid over 9 batches of 100,000.
func getppidCost() float64 {
	const batch = 100_000
	costs := make([]float64, 0, 9)
	for range 9 {
		start := time.Now()
		for range batch {
			syscall.Getppid()
		}
		costs = append(costs, float64(time.Since(start).Nanoseconds())/batch)
	}
	for i := range costs { // insertion sort: 9 values
		for j := i; j > 0 && costs[j] < costs[j-1]; j-- {
			costs[j], costs[j-1] = costs[j-1], costs[j]
		}
	}
	return costs[len(costs)/2]
}

// appendRow appends one run's row to the TSV file at path, writing the
// header first when the file is new or empty.
func appendRow(path, commit, round string, m machine, r runResult, ended time.Time) error {
	if err := upgradeHeader(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() == 0 {
		if _, err := fmt.Fprintln(f, tsvHeader); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	row := strings.Join([]string{
		ended.UTC().Format(time.RFC3339), commit, round, r.Drill, strconv.Itoa(r.Exit),
		strconv.FormatFloat(r.LateShare, 'g', -1, 64), r.LagP99.String(), m.Guest, strconv.FormatFloat(m.Getppid, 'f', 0, 64),
		rightWord(r.right()), strings.Join(r.Failed, ","),
	}, "\t")
	if _, err := fmt.Fprintln(f, row); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// upgradeHeader rewrites the header of the TSV file at path to tsvHeader
// when it is an older header that tsvHeader extends (its rows keep their
// columns; the new ones are empty for them). A missing file is left
// alone.
func upgradeHeader(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	if first == tsvHeader || first == "" || !strings.HasPrefix(tsvHeader, first+"\t") {
		return nil
	}
	if err := os.WriteFile(path, []byte(tsvHeader+"\n"+rest), 0o644); err != nil {
		return fmt.Errorf("rewrite the header of %s: %w", path, err)
	}
	return nil
}

// rightWord is a TSV boolean.
func rightWord(ok bool) string {
	if ok {
		return "1"
	}
	return "0"
}

// headCommit is the short commit of the checkout drill was built from
// ("unknown" outside a git checkout).
func headCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
