package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/inject"
)

// JournalEntry records a workers Job that may exist: written and synced
// before the Job is created, removed once it is deleted.
type JournalEntry struct {
	// Run is the run id.
	Run string `json:"run"`
	// Kubeconfig and Context say which cluster ("" Kubeconfig: the default
	// loading rules).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context"`
	// Namespace and Job name the Job.
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	// Created is when the entry was written.
	Created time.Time `json:"created"`
}

// Journal is one run's record of its workers Job under a state directory:
// <state dir>/workers/<run>.json. A nil *Journal records nothing.
type Journal struct {
	path string
	base JournalEntry
}

// JournalDir is where the workers journals of stateDir live.
func JournalDir(stateDir string) string { return filepath.Join(stateDir, "workers") }

// OpenJournal returns the journal of runID under stateDir; kubeconfig and
// kubeContext name the cluster the Job goes to. Nothing is written yet.
// Errors: an empty run id or state dir.
func OpenJournal(stateDir, runID, kubeconfig, kubeContext string) (*Journal, error) {
	if stateDir == "" || runID == "" || strings.ContainsAny(runID, "/\\") {
		return nil, fmt.Errorf("open workers journal: need a state dir and a plain run id (got %q, %q)", stateDir, runID)
	}
	return &Journal{
		path: filepath.Join(JournalDir(stateDir), runID+".json"),
		base: JournalEntry{Run: runID, Kubeconfig: kubeconfig, Context: kubeContext},
	}, nil
}

// Created records that the Job ns/job of runID may exist: the entry is
// written and synced to disk (call it before creating the Job). Errors
// name the file.
func (j *Journal) Created(ns, job, runID string) error {
	if j == nil {
		return nil
	}
	e := j.base
	e.Run, e.Namespace, e.Job, e.Created = runID, ns, job, time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode workers journal: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("create workers journal dir: %w", err)
	}
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write workers journal: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("write workers journal %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("write workers journal: %w", err)
	}
	return nil
}

// Deleted removes the entry (the Job is gone). A missing entry is not an
// error.
func (j *Journal) Deleted() error {
	if j == nil {
		return nil
	}
	if err := os.Remove(j.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove workers journal: %w", err)
	}
	return nil
}

// ReadJournals returns the workers journal entries under stateDir (only
// runID's when it is not empty), oldest first. A missing directory is no
// entry. Errors name the unreadable file.
func ReadJournals(stateDir, runID string) ([]JournalEntry, error) {
	dir := JournalDir(stateDir)
	runs, err := inject.ListJournals(dir, ".json")
	if err != nil {
		return nil, fmt.Errorf("read workers journals: %w", err)
	}
	var out []JournalEntry
	for _, run := range runs {
		if runID != "" && run != runID {
			continue
		}
		name := run + ".json"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return out, fmt.Errorf("read workers journal: %w", err)
		}
		var e JournalEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return out, fmt.Errorf("workers journal %s: %w", name, err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Created.Before(out[k].Created) })
	return out, nil
}

// ClientFor returns a client of the cluster a journal entry names.
type ClientFor func(kubeconfig, kubeContext string) (kubernetes.Interface, error)

// Cleanup deletes the workers Job (and its pods) of every journal entry
// under stateDir (only runID's when set) and removes each entry whose Job
// is gone. It goes on after a failure. removed lists "job NS/NAME (run
// ID)" for each Job deleted; the error joins the failures.
func Cleanup(ctx context.Context, stateDir, runID string, client ClientFor) (removed []string, err error) {
	entries, err := ReadJournals(stateDir, runID)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		what := fmt.Sprintf("job %s/%s (run %s)", e.Namespace, e.Job, e.Run)
		cs, cerr := client(e.Kubeconfig, e.Context)
		if cerr != nil {
			errs = append(errs, fmt.Errorf("%s: connect to context %q: %w", what, e.Context, cerr))
			continue
		}
		if derr := DeleteJob(ctx, cs, e.Namespace, e.Job, e.Run); derr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, derr))
			continue
		}
		j := &Journal{path: filepath.Join(JournalDir(stateDir), e.Run+".json")}
		if rerr := j.Deleted(); rerr != nil {
			errs = append(errs, rerr)
		}
		removed = append(removed, what)
	}
	return removed, errors.Join(errs...)
}
