// Package observe watches the system under test besides the load streams
// and turns what it sees into time-stamped events on the run's clock
// (docs/DESIGN.md §8): Kubernetes pods, EndpointSlices and pod Events
// through client-go informers ([Kube]), Prometheus /metrics scrapes
// ([Scraper]), PromQL queries ([PromQL], [QueryRange]), PostgreSQL's
// pg_stat_activity ([Postgres]) and HTTP probes ([Prober]). [Start] runs
// the observers a scenario names.
package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/scenario"
)

// DefaultSyncTimeout bounds how long [Start] waits for the Kubernetes
// informers' initial list.
const DefaultSyncTimeout = 60 * time.Second

// Deps is what [Start] needs from the runner.
type Deps struct {
	// Kube is the clientset of a kubernetes run; nil in a local run (then
	// pod and EndpointSlice observers are an error).
	Kube kubernetes.Interface
	// Namespace is the run's namespace, used by observers that name none.
	Namespace string
	// KubeTargets are watched besides the scenario's pod and EndpointSlice
	// observers (e.g. derived from services with a selector).
	KubeTargets []KubeTarget
	// KubeOptions are passed to [NewKube].
	KubeOptions []KubeOption
	// Expand resolves ${...} references in observer URLs (the runner passes
	// scenario.Expand bound to its vars); nil leaves URLs as written.
	Expand func(string) (string, error)
	// HTTPClient is used by scrapers and PromQL observers; nil: their defaults.
	HTTPClient *http.Client
	// SyncTimeout bounds the wait for the informers' initial list; default
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
}

// Start starts every observer of obs and returns once they run (for
// Kubernetes: once the informers have listed, so the initial state is on
// the log before load starts). stop ends them all and waits for them; it is
// safe to call more than once. Pod and EndpointSlice observers with the
// same Name form one target, so their events share Event.Service.
//
// Errors (nothing is left running): a URL that does not expand or is not
// an absolute http(s) URL, Kubernetes observers without deps.Kube, an
// invalid selector, or informers that did not sync within the timeout.
func Start(ctx context.Context, obs scenario.Observers, deps Deps, clock *event.Clock, sink event.Sink, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	expand := deps.Expand
	if expand == nil {
		expand = func(s string) (string, error) { return s, nil }
	}
	type runner struct {
		name string
		run  func(context.Context) error
	}
	var runs []runner
	var errs []error
	checkURL := func(field, name, raw string) string {
		u, err := expand(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", field, name, err))
			return ""
		}
		if err := httpURL(u); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): url %q: %w", field, name, u, err))
			return ""
		}
		return u
	}

	for i, m := range obs.Metrics {
		u := checkURL(fmt.Sprintf("observers.metrics[%d]", i), m.Name, m.URL)
		s := &Scraper{Name: m.Name, URL: u, Interval: m.Interval.D(), Families: m.Metrics, Client: deps.HTTPClient,
			Clock: clock, Sink: sink, Log: log.With("observer", m.Name)}
		runs = append(runs, runner{m.Name, s.Run})
	}
	for i, p := range obs.Probes {
		u := checkURL(fmt.Sprintf("observers.probes[%d]", i), p.Name, p.URL)
		pr := &Prober{Name: p.Name, URL: u, Interval: p.Interval.D(), Timeout: p.Timeout.D(),
			Clock: clock, Sink: sink, Log: log.With("observer", p.Name)}
		runs = append(runs, runner{p.Name, pr.Run})
	}
	for i, pg := range obs.Postgres {
		dsn, err := expand(pg.DSN)
		if err != nil {
			errs = append(errs, fmt.Errorf("observers.postgres[%d] (%s): dsn: %w", i, pg.Name, err))
		}
		po := &Postgres{Name: pg.Name, DSN: dsn, Interval: pg.Interval.D(), Clock: clock, Sink: sink, Log: log.With("observer", pg.Name)}
		runs = append(runs, runner{pg.Name, po.Run})
	}
	for i, q := range obs.PromQL {
		u := checkURL(fmt.Sprintf("observers.promql[%d]", i), q.Name, q.URL)
		pq := &PromQL{Name: q.Name, URL: u, Query: q.Query, Interval: q.Interval.D(), Client: deps.HTTPClient,
			Clock: clock, Sink: sink, Log: log.With("observer", q.Name)}
		if u != "" {
			if err := pq.init(); err != nil {
				errs = append(errs, fmt.Errorf("observers.promql[%d] (%s): %w", i, q.Name, err))
			}
		}
		runs = append(runs, runner{q.Name, pq.Run})
	}

	targets, terr := kubeTargets(obs, deps)
	errs = append(errs, terr...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	launch := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				log.Warn("observer stopped", "observer", name, "err", err)
			}
		}()
	}

	if len(targets) > 0 {
		k := NewKube(deps.Kube, clock, sink, targets, log.With("observer", "kubernetes"), deps.KubeOptions...)
		launch("kubernetes", k.Run)
		timeout := deps.SyncTimeout
		if timeout <= 0 {
			timeout = DefaultSyncTimeout
		}
		syncCtx, syncCancel := context.WithTimeout(ctx, timeout)
		err := k.WaitSynced(syncCtx)
		syncCancel()
		if err != nil {
			stop()
			return nil, fmt.Errorf("start kubernetes observer: %w", err)
		}
	}
	for _, r := range runs {
		launch(r.name, r.run)
	}
	return stop, nil
}

// kubeTargets merges the pod and EndpointSlice observers of obs (by Name)
// with deps.KubeTargets.
func kubeTargets(obs scenario.Observers, deps Deps) ([]KubeTarget, []error) {
	var errs []error
	if (len(obs.Pods) > 0 || len(obs.EndpointSlices) > 0 || len(deps.KubeTargets) > 0) && deps.Kube == nil {
		return nil, []error{errors.New("observers.pods and observers.endpointSlices need a kubernetes environment (no cluster client)")}
	}
	nsOr := func(ns string) string {
		if ns == "" {
			return deps.Namespace
		}
		return ns
	}
	var out []KubeTarget
	index := map[string]int{}
	for i, p := range obs.Pods {
		if p.Selector == "" {
			errs = append(errs, fmt.Errorf("observers.pods[%d] (%s): selector is empty", i, p.Name))
		}
		index[p.Name] = len(out)
		out = append(out, KubeTarget{Service: p.Name, Namespace: nsOr(p.Namespace), Selector: p.Selector})
	}
	for i, s := range obs.EndpointSlices {
		if s.Service == "" {
			errs = append(errs, fmt.Errorf("observers.endpointSlices[%d] (%s): service is empty", i, s.Name))
		}
		if j, ok := index[s.Name]; ok && out[j].Namespace == nsOr(s.Namespace) && out[j].EndpointSliceService == "" {
			out[j].EndpointSliceService = s.Service
			continue
		}
		out = append(out, KubeTarget{Service: s.Name, Namespace: nsOr(s.Namespace), EndpointSliceService: s.Service})
	}
	out = append(out, deps.KubeTargets...)
	for i, t := range out {
		if t.Namespace == "" {
			errs = append(errs, fmt.Errorf("kubernetes target %d (%s): no namespace (set the observer's namespace or the run's)", i, t.Service))
		}
	}
	return out, errs
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return nil
}
