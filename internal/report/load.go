package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/textio"
	"github.com/drillhq/drill/internal/workers"
)

// LoadSummary writes drill load's table to w: one line per stream of
// streams that has a series in series, with its requests, intended and
// achieved rate (requests per second over the stream's duration),
// latency p50, p90, p99 and max from intended send times (milliseconds,
// "-" when none), errors (the count with its breakdown by status and
// kind, e.g. "12 (503:10 timeout:2)") and late sends. It returns the
// first write error.
func LoadSummary(w io.Writer, streams []scenario.Stream, series map[string]*measure.Series) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stream\trequests\tintended/s\tachieved/s\tp50\tp90\tp99\tmax\terrors\tlate\t")
	for _, st := range streams {
		s := series[st.Name]
		if s == nil {
			continue
		}
		b := s.Total()
		secs := st.Duration.D().Seconds()
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%d\t\n", st.Name, b.Requests,
			float64(b.Intended)/secs, float64(b.Requests)/secs,
			ms(b.Quantile(50)), ms(b.Quantile(90)), ms(b.Quantile(99)), ms(b.Max()), errSummary(b), b.Late)
	}
	return tw.Flush()
}

// LoadWorkerLines writes drill load's line per load worker of res to w:
// its state (done, FAILED or stopped), pod, requests sent, late ones, its
// dispatch lag (p99 and max), how late it started and its clock against
// the API server's, then its error in parentheses if it has one. It
// returns the first write error.
func LoadWorkerLines(w io.Writer, res workers.Result) error {
	ew := &textio.ErrWriter{W: w}
	for _, wr := range res.Workers {
		state := "done"
		switch {
		case wr.Failed:
			state = "FAILED"
		case !wr.Done:
			state = "stopped"
		}
		fmt.Fprintf(ew, "worker %d  %s  pod %s  sent %d  late %d  lag p99 %s max %s  started late by %s  clock %s",
			wr.Index, state, wr.Pod, wr.Sent, wr.LateRequests, wr.LagP99, wr.LagMax, wr.Late, wr.Clock)
		if wr.Error != "" {
			fmt.Fprintf(ew, "  (%s)", wr.Error)
		}
		fmt.Fprintln(ew)
	}
	return ew.Err
}

// ms is d in milliseconds with two decimals ("1.25ms"), "-" for none.
func ms(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// errSummary is "0", or the failure count with its breakdown, e.g.
// "12 (503:10 timeout:2)".
func errSummary(b *measure.Bucket) string {
	n := b.Failures()
	if n == 0 {
		return "0"
	}
	var parts []string
	for code, c := range b.Codes {
		if code >= 400 {
			parts = append(parts, fmt.Sprintf("%d:%d", code, c))
		}
	}
	for kind, c := range b.Errors {
		parts = append(parts, fmt.Sprintf("%s:%d", kind, c))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, " "))
}
