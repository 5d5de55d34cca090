package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/drillhq/drill/internal/exitcode"
	"github.com/drillhq/drill/internal/report"
)

// ClaimFile is the file a run creates in its report directory before it
// starts anything: one JSON object naming the run ({"run": id, "pid": n,
// "host": name, "startedAt": RFC 3339 time}). It is created with O_EXCL, so
// of two runs given one directory exactly one gets it; the file stays after
// the run, so a later run does not write into the reports of an earlier
// one either. A run that wrote nothing else into the directory removes it
// again (and the directory, if the run created it).
const ClaimFile = ".drill-run"

// maxDefaultOutSuffix bounds the -2, -3, ... suffixes tried when the
// default report directory of this second is taken.
const maxDefaultOutSuffix = 99

// outClaim is the content of a [ClaimFile].
type outClaim struct {
	Run       string    `json:"run"`
	PID       int       `json:"pid"`
	Host      string    `json:"host,omitempty"`
	StartedAt time.Time `json:"startedAt"`
}

// claimedOut is a report directory this run holds.
type claimedOut struct {
	dir string
	// created lists the directories the claim created, outermost first.
	created []string
}

// errOutTaken says a report directory belongs to another run (its claim,
// or reports written without one). A default directory then moves on to
// the next suffix; an explicit --out is refused.
type errOutTaken struct {
	dir string
	// other is the other run's claim; Run is "" when the directory holds
	// reports but no claim and their run.json names no run.
	other outClaim
	// reports is true when the directory holds reports without a claim.
	reports bool
}

func (e *errOutTaken) Error() string {
	who := "another run"
	if e.other.Run != "" {
		who = "run " + e.other.Run
	}
	if e.reports {
		return fmt.Sprintf("%s already holds the reports of %s", e.dir, who)
	}
	var state string
	switch {
	case e.other.PID <= 0:
		state = "its claim is being written"
	case e.other.Host != "" && e.other.Host != hostname():
		state = fmt.Sprintf("pid %d on host %s, started %s", e.other.PID, e.other.Host, e.other.StartedAt.Format(time.RFC3339))
	case pidAlive(e.other.PID):
		state = fmt.Sprintf("pid %d, started %s, still running", e.other.PID, e.other.StartedAt.Format(time.RFC3339))
	default:
		state = fmt.Sprintf("pid %d, started %s, finished", e.other.PID, e.other.StartedAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s belongs to %s (%s)", e.dir, who, state)
}

// claimOut makes the run's report directory its own before anything
// starts: it creates the directory (and missing parents) and the
// [ClaimFile] in it, which also proves the directory can be written. An
// explicit --out that is a file, cannot be created or written, or belongs
// to another run is refused with exit code 2 and the error names --out,
// the directory and the other run's id; nothing is left behind. The default
// directory (reports/<scenario>-<UTC time>) taken by another run of the
// same second gets a -2, -3, ... suffix instead. On success r.opts.OutDir is
// the claimed directory.
func (r *run) claimOut() (*claimedOut, error) {
	explicit := r.opts.OutDir != ""
	base := r.outDir()
	flag := "--out " + base
	if !explicit {
		flag = "report directory " + base + " (the default; set --out to choose one)"
	}
	c := outClaim{Run: r.id, PID: os.Getpid(), Host: hostname(), StartedAt: time.Now().UTC()}
	for n := 1; ; n++ {
		dir := base
		if n > 1 {
			dir = fmt.Sprintf("%s-%d", base, n)
		}
		out, err := claimDir(dir, c)
		var taken *errOutTaken
		switch {
		case err == nil:
			r.opts.OutDir = dir
			r.log.Info("report directory claimed", "dir", dir)
			return out, nil
		case errors.As(err, &taken) && !explicit && n < maxDefaultOutSuffix:
			continue
		case errors.As(err, &taken):
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w; two runs never share a report directory: choose another --out, or remove %s", flag, err, dir))
		}
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("%s: %w", flag, err))
	}
}

// claimDir creates dir (and missing parents) and dir/[ClaimFile] holding
// c. It returns *errOutTaken when dir holds another claim or reports
// without one, and otherwise a plain error when dir cannot be created or
// written. On error nothing it created remains.
func claimDir(dir string, c outClaim) (_ *claimedOut, err error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, errors.New("is a file, not a directory")
	}
	out := &claimedOut{dir: dir}
	defer func() {
		if err != nil {
			out.removeCreated()
		}
	}()
	if out.created, err = mkdirs(dir); err != nil {
		return nil, fmt.Errorf("cannot be created: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode claim: %w", err)
	}
	path := filepath.Join(dir, ClaimFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		other, _ := readClaim(path)
		return nil, &errOutTaken{dir: dir, other: other}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot be written: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("cannot be written: %w", werr)
	}
	// Reports written by a drill that predates claims, or copied in.
	if other, ok := reportsIn(dir); ok {
		_ = os.Remove(path)
		return nil, &errOutTaken{dir: dir, other: other, reports: true}
	}
	return out, nil
}

// release removes the claim when the run wrote nothing else into the
// directory (it failed before any log or report), and then the
// directories the claim created, innermost first, as far as they are
// empty. Reports and logs keep their claim.
func (o *claimedOut) release() error {
	if o == nil {
		return nil
	}
	ents, err := os.ReadDir(o.dir)
	if err != nil {
		return fmt.Errorf("read report directory %s: %w", o.dir, err)
	}
	if len(ents) != 1 || ents[0].Name() != ClaimFile {
		return nil
	}
	if err := os.Remove(filepath.Join(o.dir, ClaimFile)); err != nil {
		return fmt.Errorf("remove the claim of an unused report directory: %w", err)
	}
	o.removeCreated()
	return nil
}

// removeCreated removes the directories the claim created, innermost
// first, each only while it is empty.
func (o *claimedOut) removeCreated() {
	for i := len(o.created) - 1; i >= 0; i-- {
		if os.Remove(o.created[i]) != nil {
			return
		}
	}
}

// mkdirs creates dir and its missing parents (mode 0755) and returns the
// directories it created, outermost first.
func mkdirs(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // made meanwhile by another run: not ours to remove
		}
		if err != nil {
			return created, err
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// readClaim reads a [ClaimFile]; an empty or torn one (its run is writing
// it) gives the zero claim and an error.
func readClaim(path string) (outClaim, error) {
	var c outClaim
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	err = json.Unmarshal(b, &c)
	return c, err
}

// reportsIn reports whether dir holds files a run writes (reports, replica
// logs) and, when its run.json names one, that run.
func reportsIn(dir string) (outClaim, bool) {
	var c outClaim
	found := false
	for _, name := range []string{report.RunFile, report.JUnitFile, report.HTMLFile, "logs"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			found = true
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, report.RunFile)); err == nil {
		var rec struct {
			RunID string `json:"runId"`
		}
		if json.Unmarshal(b, &rec) == nil {
			c.Run = rec.RunID
		}
	}
	return c, found
}

// pidAlive reports whether a process with this pid exists on this machine.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
