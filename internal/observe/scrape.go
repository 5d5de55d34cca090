package observe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/drillhq/drill/internal/event"
)

// SourceScrape is the Event.Source of metric samples read from /metrics.
const SourceScrape = "scrape"

// maxScrapeBody caps how much of a /metrics response is read, in bytes.
const maxScrapeBody = 64 << 20

// Scraper reads a Prometheus text exposition from URL every Interval and
// emits one [event.Metric] per sample of the selected families (scenario
// observers.metrics). Counters, gauges and untyped metrics give one sample
// each; summaries give <name>_count, <name>_sum and one <name> sample per
// quantile (label "quantile"); histograms give <name>_count and <name>_sum,
// plus <name>_bucket per bucket (label "le") when Buckets is set.
//
// Like a Prometheus server with honor_labels, it adds the labels job (Name)
// and instance (the URL's host:port) unless the target already sets them,
// and it emits the synthetic sample "up" (1 after a good scrape, 0 after a
// failed one) on every scrape. All samples of one scrape carry the time the
// scrape started. A failed scrape is recorded as an [event.Note] (the
// first failure, then one when the error changes, and one when scraping
// recovers), never as a crash.
type Scraper struct {
	// Name is the observer's name (label job).
	Name string
	// URL is the absolute http(s) URL of the /metrics endpoint.
	URL string
	// Interval between scrape starts; default 1s.
	Interval time.Duration
	// Timeout of one scrape; default Interval, at least 1s and at most 10s
	// (a scrape longer than Interval delays the next one: never two at once).
	Timeout time.Duration
	// Families are the metric family names to record (the derived names
	// <family>_count, _sum, _bucket also select); empty records all.
	Families []string
	// Buckets records histogram buckets as <family>_bucket samples.
	Buckets bool
	// Client is the HTTP client; default &http.Client{} (Timeout bounds each scrape).
	Client *http.Client
	// Clock stamps the events; required.
	Clock *event.Clock
	// Sink receives the events; required.
	Sink event.Sink
	// Log receives debug logs; default discards.
	Log *slog.Logger

	poll pollState
}

// Run scrapes once immediately, then every Interval until ctx is done. It
// returns nil when ctx ends.
func (s *Scraper) Run(ctx context.Context) error {
	s.defaults()
	every(ctx, s.Interval, func() { s.scrapeAndEmit(ctx) })
	return nil
}

func (s *Scraper) defaults() {
	if s.Interval <= 0 {
		s.Interval = time.Second
	}
	if s.Timeout <= 0 {
		s.Timeout = min(max(s.Interval, time.Second), 10*time.Second)
	}
	if s.Client == nil {
		s.Client = &http.Client{}
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
}

func (s *Scraper) scrapeAndEmit(ctx context.Context) {
	at := s.Clock.Now()
	samples, err := s.Scrape(ctx)
	if ctx.Err() != nil {
		return // shutting down: not a target failure
	}
	up := 1.0
	if err != nil {
		up = 0
		s.Log.Debug("scrape failed", "observer", s.Name, "url", s.URL, "err", err)
	}
	note := s.poll.result(at, err, func(failed int, since time.Duration) string {
		return fmt.Sprintf("scrape %s recovered after %d failed scrapes since t=%s", s.URL, failed, since)
	})
	if note != "" {
		s.Sink.Emit(event.Event{At: at, Kind: event.Note, Source: SourceScrape, Detail: fmt.Sprintf("observer %s: %s", s.Name, note)})
	}
	for _, sm := range samples {
		s.Sink.Emit(event.Event{At: at, Kind: event.Metric, Source: SourceScrape, Metric: sm.Name, Labels: sm.Labels, Value: sm.Value})
	}
	s.Sink.Emit(event.Event{At: at, Kind: event.Metric, Source: SourceScrape, Metric: "up", Labels: s.targetLabels(nil), Value: up})
}

// Sample is one scraped series value.
type Sample struct {
	// Name is the sample name (family name, or with _count/_sum/_bucket).
	Name string
	// Labels include job and instance.
	Labels map[string]string
	// Value is the sample value (unit as exposed).
	Value float64
}

// Scrape performs one scrape and returns the selected samples. Errors:
// request failure, non-2xx status, unparsable body (wrapped "scrape <url>").
func (s *Scraper) Scrape(ctx context.Context) ([]Sample, error) {
	s.defaults()
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("scrape %s: HTTP %s", s.URL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation) // never the zero value: it panics
	fams, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxScrapeBody))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: parse text exposition: %w", s.URL, err)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Sample
	for _, n := range names {
		out = s.appendFamily(out, fams[n])
	}
	return out, nil
}

func (s *Scraper) selected(family, sample string) bool {
	if len(s.Families) == 0 {
		return true
	}
	return slices.Contains(s.Families, family) || slices.Contains(s.Families, sample)
}

func (s *Scraper) appendFamily(out []Sample, f *dto.MetricFamily) []Sample {
	name := f.GetName()
	add := func(sample string, m *dto.Metric, v float64, extra ...string) {
		if !s.selected(name, sample) {
			return
		}
		l := make(map[string]string, len(m.GetLabel())+2+len(extra)/2)
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		out = append(out, Sample{Name: sample, Labels: s.targetLabels(l), Value: v})
	}
	for _, m := range f.GetMetric() {
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			add(name, m, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			add(name, m, m.GetGauge().GetValue())
		case dto.MetricType_UNTYPED:
			add(name, m, m.GetUntyped().GetValue())
		case dto.MetricType_SUMMARY:
			sm := m.GetSummary()
			add(name+"_count", m, float64(sm.GetSampleCount()))
			add(name+"_sum", m, sm.GetSampleSum())
			for _, q := range sm.GetQuantile() {
				add(name, m, q.GetValue(), model.QuantileLabel, formatFloat(q.GetQuantile()))
			}
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := m.GetHistogram()
			add(name+"_count", m, float64(h.GetSampleCount()))
			add(name+"_sum", m, h.GetSampleSum())
			if s.Buckets {
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m, float64(b.GetCumulativeCount()), model.BucketLabel, formatFloat(b.GetUpperBound()))
				}
				if bs := h.GetBucket(); len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
					add(name+"_bucket", m, float64(h.GetSampleCount()), model.BucketLabel, "+Inf")
				}
			}
		}
	}
	return out
}

// targetLabels adds job and instance to l (a new map when l is nil) unless set.
func (s *Scraper) targetLabels(l map[string]string) map[string]string {
	if l == nil {
		l = make(map[string]string, 2)
	}
	if _, ok := l["job"]; !ok {
		l["job"] = s.Name
	}
	if _, ok := l["instance"]; !ok {
		if u, err := url.Parse(s.URL); err == nil {
			l["instance"] = u.Host
		}
	}
	return l
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// every calls fn now and then every interval until ctx is done. Ticks
// missed while fn runs are dropped, so a slow target is polled at most once
// per interval.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
