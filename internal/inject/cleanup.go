package inject

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/kube"
	"github.com/drillhq/drill/internal/placement"
	"github.com/drillhq/drill/internal/proctree"
)

// CleanupOptions says what [Cleanup] removes.
type CleanupOptions struct {
	// StateDir holds the journals (see [DefaultStateDir]); "" skips them.
	StateDir string
	// RunID limits cleanup to one run; "" means every run.
	RunID string
	// Toxiproxy, if set, is swept for toxics named drill-* (or
	// drill-<RunID>-*) whether or not a journal knows them, and is used for
	// journal entries that name its URL.
	Toxiproxy Toxiproxy
	// Docker unpauses containers; nil means [DockerPauser].
	Docker ContainerPauser
	// NewRemote opens the Toxiproxy named in a journal entry; nil means
	// [NewRemote]. (A test seam.)
	NewRemote func(url string) Toxiproxy
	// NewKube connects to the cluster a kubernetes platform fault's entry
	// names (kubeconfig "" is kubectl's default loading); nil loads it
	// with [kube.Load]. (A test seam.)
	NewKube func(kubeconfig, context, namespace string) (kubernetes.Interface, error)
	// Log gets a line per action; nil discards.
	Log *slog.Logger
}

// CleanupReport lists what [Cleanup] did.
type CleanupReport struct {
	// Removed lists what was undone.
	Removed []Leftover
	// Gone lists journal entries whose target no longer exists (an embedded
	// Toxiproxy that ended with its run, a process group that exited).
	Gone []Leftover
	// Failed lists what could not be undone; the error says why.
	Failed []Leftover
}

// Cleanup undoes what killed runs left behind: every applied-but-not-reverted
// journal entry, newest first (toxics removed, disabled proxies re-enabled,
// process groups continued with SIGCONT, containers unpaused, throwaway
// PostgreSQL clusters continued, killed and their temp dirs removed, the
// run's cgroup removed once its processes are gone; each success is
// journaled as reverted), then every drill toxic still on opts.Toxiproxy.
// A process pause continues each journaled process that still exists with
// the same start time, even when the group's leader is gone. It goes on
// after a failure and returns the failures joined. Running it twice is
// harmless.
func Cleanup(ctx context.Context, opts CleanupOptions) (CleanupReport, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.NewRemote == nil {
		opts.NewRemote = func(url string) Toxiproxy { return NewRemote(url) }
	}
	if opts.Docker == nil {
		opts.Docker = DockerPauser{}
	}
	if opts.RunID != "" {
		if err := ValidRunID(opts.RunID); err != nil {
			return CleanupReport{}, fmt.Errorf("clean up: %w", err)
		}
	}
	var rep CleanupReport
	var errs []error
	if opts.StateDir != "" {
		errs = append(errs, cleanupJournals(ctx, opts, &rep, log)...)
	}
	if opts.Toxiproxy != nil {
		prefix := ToxicPrefix
		if opts.RunID != "" {
			prefix = RunPrefix(opts.RunID)
		}
		left, err := toxicsWithPrefix(ctx, opts.Toxiproxy, prefix)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", opts.Toxiproxy.APIURL(), err))
		}
		for _, l := range left {
			err := opts.Toxiproxy.RemoveToxic(ctx, l.Proxy, l.Toxic)
			switch {
			case err == nil || errors.Is(err, ErrToxicNotFound):
				log.Info("removed leftover toxic", "toxic", l.Toxic, "proxy", l.Proxy)
				rep.Removed = append(rep.Removed, l)
			default:
				rep.Failed = append(rep.Failed, l)
				errs = append(errs, err)
			}
		}
	}
	return rep, errors.Join(errs...)
}

func cleanupJournals(ctx context.Context, opts CleanupOptions, rep *CleanupReport, log *slog.Logger) []error {
	runs := []string{opts.RunID}
	if opts.RunID == "" {
		var err error
		if runs, err = JournalRuns(opts.StateDir); err != nil {
			return []error{err}
		}
	}
	var errs []error
	for _, run := range runs {
		entries, err := ReadJournal(JournalPath(opts.StateDir, run))
		if errors.Is(err, os.ErrNotExist) && opts.RunID != "" {
			log.Info("no journal for run", "run", run)
			continue
		}
		if err != nil && len(entries) == 0 {
			errs = append(errs, err)
			continue
		}
		pending := Pending(entries)
		if len(pending) == 0 {
			continue
		}
		j, err := OpenJournal(opts.StateDir, run)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := len(pending) - 1; i >= 0; i-- {
			e := pending[i]
			detail, gone, err := undoEntry(ctx, opts, e)
			l := leftoverOf(e)
			l.Detail = detail
			if err != nil {
				rep.Failed = append(rep.Failed, l)
				errs = append(errs, fmt.Errorf("run %s: undo %s: %w", run, l, err))
				continue
			}
			if gone {
				rep.Gone = append(rep.Gone, l)
			} else {
				rep.Removed = append(rep.Removed, l)
			}
			log.Info("undid journaled fault", "run", run, "what", l.String(), "gone", gone)
			e.Op = OpRevert
			if err := j.Record(e); err != nil {
				errs = append(errs, err)
			}
		}
		_ = j.Close()
	}
	return errs
}

// undoEntry reverts one journal entry. gone says the target no longer
// existed, so nothing was left to undo; detail, when not empty, says what
// was done.
func undoEntry(ctx context.Context, opts CleanupOptions, e Entry) (detail string, gone bool, err error) {
	if e.Kind == KindPostgres {
		return undoPostgres(ctx, e)
	}
	if e.Kind == KindCompose {
		return undoCompose(ctx, e)
	}
	if e.Kind == KindStandIn {
		return undoStandIn(ctx, e)
	}
	if e.Kind == KindLocalPods {
		return undoLocalPods(ctx, e)
	}
	if e.Kind == KindComposePods {
		return undoComposePods(ctx, e)
	}
	if e.Kind == KindKubePods {
		return fmt.Sprintf("pods %s of namespace %s were deleted; nothing to undo: their ReplicaSet replaces them",
			strings.Join(e.Pods, ", "), e.Namespace), true, nil
	}
	if e.Kind == KindKubeDeployment {
		return undoKubeDeployment(ctx, opts, e)
	}
	if e.Kind == KindKubeNode {
		return undoKubeNode(ctx, opts, e)
	}
	gone, err = undoFault(ctx, opts, e)
	return "", gone, err
}

// undoKubeDeployment is [Cleanup]'s work for a [KindKubeDeployment]
// entry: a restart cannot be undone (the Deployment controller finishes
// it), and drill pauses no rollout, so only the strategy drill wrote is
// put back.
func undoKubeDeployment(ctx context.Context, opts CleanupOptions, e Entry) (detail string, gone bool, err error) {
	why := fmt.Sprintf("a rollout cannot be undone: the Deployment controller finishes the restart of %s/%s; drill paused nothing", e.Namespace, e.Deployment)
	if e.Strategy == "" {
		return why, true, nil
	}
	cs, err := cleanupKube(opts, e)
	if err != nil {
		return "", false, err
	}
	if err := restoreStrategy(ctx, &KubeEnv{Client: cs, Namespace: e.Namespace}, e.Deployment, e.Strategy); err != nil {
		return "", false, err
	}
	return "put back the strategy " + e.Strategy + "; " + why, false, nil
}

// cleanupKube connects to the cluster a journal entry names.
func cleanupKube(opts CleanupOptions, e Entry) (kubernetes.Interface, error) {
	newKube := opts.NewKube
	if newKube == nil {
		newKube = func(kubeconfig, context, namespace string) (kubernetes.Interface, error) {
			cfg, err := kube.Load(kubeconfig, context, namespace)
			if err != nil {
				return nil, err
			}
			return cfg.Clientset()
		}
	}
	cs, err := newKube(e.Kubeconfig, e.Context, e.Namespace)
	if err != nil {
		return nil, fmt.Errorf("connect to kubeconfig context %s (fault %s): %w", e.Context, e.Fault, err)
	}
	return cs, nil
}

// undoFault reverts the journal entry of one fault (see [undoEntry]).
func undoFault(ctx context.Context, opts CleanupOptions, e Entry) (gone bool, err error) {
	tp := func() Toxiproxy {
		if opts.Toxiproxy != nil && (e.Toxiproxy == "" || e.Toxiproxy == opts.Toxiproxy.APIURL()) {
			return opts.Toxiproxy
		}
		return opts.NewRemote(e.Toxiproxy)
	}
	switch e.Kind {
	case KindToxic:
		return toxiproxyUndone(e, tp().RemoveToxic(ctx, e.Proxy, e.Toxic), ErrToxicNotFound, ErrProxyNotFound)
	case KindProxyDisabled:
		return toxiproxyUndone(e, tp().SetEnabled(ctx, e.Proxy, true), ErrProxyNotFound)
	case KindProxyCreated:
		return toxiproxyUndone(e, tp().DeleteProxy(ctx, e.Proxy), ErrProxyNotFound)
	case KindProcessPause:
		if len(e.Procs) > 0 {
			// Every journaled process still the same one, even if the
			// leader died (its children re-parented, in their own
			// sessions, would otherwise stay stopped forever).
			done, err := proctree.ContIDs(e.PGID, e.Procs)
			return err == nil && len(done) == 0, err
		}
		// An older journal without start times: the group and its tree.
		if tree, _ := proctree.Tree(e.PGID); len(tree) == 0 {
			return true, nil
		}
		return false, proctree.Cont(e.PGID, e.PIDs)
	case KindContainerPause:
		return false, opts.Docker.Unpause(ctx, e.Container)
	case KindCgroup:
		return placement.Remove(e.Cgroup)
	}
	return false, fmt.Errorf("unknown journal kind %q", e.Kind)
}

// toxiproxyUndone classifies err, the outcome of reverting e on its
// Toxiproxy: nil is undone; an error matching one of notFound means the
// target no longer existed (gone); so does an unreachable API when the
// server was embedded (it ended with its run); any other error is returned.
func toxiproxyUndone(e Entry, err error, notFound ...error) (gone bool, _ error) {
	if err == nil {
		return false, nil
	}
	for _, nf := range notFound {
		if errors.Is(err, nf) {
			return true, nil
		}
	}
	if e.Embedded && isUnreachable(err) {
		return true, nil
	}
	return false, err
}

// isUnreachable reports a refused connection to the API, or no answer. The
// v2 client formats some transport errors with %v, so the text is checked
// too.
func isUnreachable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, ErrCallTimeout) ||
		strings.Contains(err.Error(), "connection refused")
}
