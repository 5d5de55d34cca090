// Command loadbench measures drill's load engine (internal/load). It prints
// figures; it asserts nothing. bench/run.sh drives it.
//
//	loadbench saturation -url URL -duration 10s -workers 32
//	    as many requests as 32 workers can send; prints req/s
//	loadbench seeds -urls U1,U2,U3 -duration 60s
//	    2,800 + 1,400 + 150 req/s at once; achieved rate and dispatch lag per stream
//	loadbench accuracy -upstream HOST:PORT -duration 20s
//	    through an in-process Toxiproxy with a 50 ms latency toxic; p50 - 50 ms
//	loadbench memory -urls U1,U2,U3 -duration 60s
//	    4,350 req/s; RSS every 10 s, at 1 min and at the end
//	loadbench hang -url URL -rate 2800 -duration 20s
//	    one stream against a target that holds every request (bench/stub
//	    -hold 2s); requests, dispatch lag, late share, peak RSS, goroutines
//	loadbench vegeta-lag -rate 2800 FILE
//	    the same figures from a vegeta attack's results file (binary
//	    encoding), with the dispatch lag of hit k taken as its timestamp
//	    minus (t0 + k/rate), t0 the attack's earliest possible start
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/drillhq/drill/internal/event"
	"github.com/drillhq/drill/internal/load"
	"github.com/drillhq/drill/internal/measure"
	"github.com/drillhq/drill/internal/scenario"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadbench saturation|seeds|accuracy|memory|hang|vegeta-lag [flags]")
		os.Exit(2)
	}
	mode, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	url := fs.String("url", "", "target URL (saturation)")
	urls := fs.String("urls", "", "three comma-separated target URLs (seeds, memory)")
	upstream := fs.String("upstream", "", "stub host:port behind the proxy (accuracy)")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	workers := fs.Int("workers", 32, "max workers (saturation)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	scale := fs.Float64("scale", 1, "multiply the seeds' rates by this (memory, seeds)")
	maxConns := fs.Int("max-connections", 0, "maxConnections of each stream (seeds, memory; 0: unlimited)")
	rate := fs.Int("rate", 2800, "requests per second (hang, vegeta-lag)")
	timeout := fs.Duration("timeout", 5*time.Second, "each stream's request timeout")
	_ = fs.Parse(args)
	streamMaxConns = *maxConns
	streamTimeout = *timeout
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadbench:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var err error
	switch mode {
	case "saturation":
		err = saturation(*url, *duration, *workers, log)
	case "seeds":
		err = seeds(strings.Split(*urls, ","), *duration, *scale, log)
	case "accuracy":
		err = accuracy(*upstream, *duration, log)
	case "memory":
		err = memory(strings.Split(*urls, ","), *duration, *scale, log)
	case "hang":
		err = hang(*url, *rate, *duration, log)
	case "vegeta-lag":
		err = vegetaLag(fs.Arg(0), *rate)
	default:
		err = fmt.Errorf("unknown mode %q; known: accuracy, hang, memory, saturation, seeds, vegeta-lag", mode)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

func d(x time.Duration) scenario.Duration { return scenario.Duration{Duration: x} }

// streamMaxConns is -max-connections.
var streamMaxConns int

// streamTimeout is -timeout: each stream's request timeout.
var streamTimeout = 5 * time.Second

func stream(name, url string, perSec int, dur time.Duration) scenario.Stream {
	return scenario.Stream{
		Name: name, Targets: []scenario.Target{{URL: url}},
		Rate: &scenario.Rate{Freq: perSec, Per: time.Second}, Duration: d(dur), Timeout: d(streamTimeout),
		MaxConnections: streamMaxConns,
	}
}

func run(streams []scenario.Stream, log *slog.Logger, during func(*load.Engine, *event.Clock)) (*load.Engine, error) {
	clock := event.NewClock()
	eng, err := load.New(clock, streams, load.Options{}, log)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	if during != nil {
		go func() { during(eng, clock); close(done) }()
	} else {
		close(done)
	}
	clock.Rezero()
	if err := eng.Run(context.Background()); err != nil {
		return nil, err
	}
	<-done
	return eng, nil
}

func saturation(url string, dur time.Duration, workers int, log *slog.Logger) error {
	if url == "" {
		return errors.New("saturation needs -url")
	}
	st := stream("saturation", url, 0, dur)
	st.MaxWorkers = workers
	start := time.Now()
	eng, err := run([]scenario.Stream{st}, log, nil)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	tot := eng.Series()["saturation"].Total()
	fmt.Printf("drill saturation: requests=%d ok=%d seconds=%.2f rate=%.0f req/s p50=%s p99=%s\n",
		tot.Requests, tot.OK, dur.Seconds(), float64(tot.Requests)/dur.Seconds(), tot.Quantile(50), tot.Quantile(99))
	_ = elapsed
	return nil
}

var seedRates = []struct {
	name string
	rate int
}{{"orders", 2800}, {"card-auth", 1400}, {"tax", 150}}

func seedStreams(urls []string, dur time.Duration, scale float64) ([]scenario.Stream, error) {
	if len(urls) != 3 {
		return nil, errors.New("needs -urls with three URLs")
	}
	var out []scenario.Stream
	for i, s := range seedRates {
		out = append(out, stream(s.name, urls[i], max(1, int(float64(s.rate)*scale+0.5)), dur))
	}
	return out, nil
}

func seeds(urls []string, dur time.Duration, scale float64, log *slog.Logger) error {
	streams, err := seedStreams(urls, dur, scale)
	if err != nil {
		return err
	}
	eng, err := run(streams, log, nil)
	if err != nil {
		return err
	}
	series := eng.Series()
	fmt.Printf("seeds: %s at (2800+1400+150) x %g req/s\n", dur, scale)
	fmt.Printf("%-10s %9s %9s %8s %10s %10s %9s %9s %7s\n", "stream", "intended", "achieved", "ratio", "lag p50", "lag p99", "lat p50", "lat p99", "late")
	for _, s := range seedRates {
		t := series[s.name].Total()
		fmt.Printf("%-10s %9d %9d %7.2f%% %10s %10s %9s %9s %7d\n", s.name, t.Intended, t.Requests,
			100*float64(t.Requests)/float64(t.Intended), measure.Quantile(t.Lag, 50), measure.Quantile(t.Lag, 99),
			t.Quantile(50), t.Quantile(99), t.Late)
	}
	fmt.Printf("validity: %v\n", errOrOK(eng.Validity()))
	return nil
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func accuracy(upstream string, dur time.Duration, log *slog.Logger) error {
	if upstream == "" {
		return errors.New("accuracy needs -upstream")
	}
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	p := toxiproxy.NewProxy(srv, "bench", "127.0.0.1:0", upstream)
	if err := srv.Collection.Add(p, true); err != nil {
		return fmt.Errorf("add proxy: %w", err)
	}
	defer func() { _ = srv.Collection.Clear() }()
	url := "http://" + p.Listen + "/"

	measureOnce := func(label string) (*measure.Bucket, error) {
		eng, err := run([]scenario.Stream{stream(label, url, 100, dur)}, log, nil)
		if err != nil {
			return nil, err
		}
		t := eng.Series()[label].Total()
		fmt.Printf("accuracy %-12s requests=%d p50=%s p90=%s p99=%s lag p99=%s validity=%s\n", label, t.Requests,
			t.Quantile(50), t.Quantile(90), t.Quantile(99), measure.Quantile(t.Lag, 99), errOrOK(eng.Validity()))
		return t, nil
	}
	base, err := measureOnce("no-toxic")
	if err != nil {
		return err
	}
	body := `{"name":"lat","type":"latency","stream":"downstream","toxicity":1.0,"attributes":{"latency":50,"jitter":0}}`
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return fmt.Errorf("add toxic: %w", err)
	}
	withToxic, err := measureOnce("latency-50ms")
	if err != nil {
		return err
	}
	p50 := withToxic.Quantile(50)
	fmt.Printf("accuracy: p50 with 50ms toxic = %s; p50 - 50ms = %s; minus the no-toxic p50 (%s) = %s\n",
		p50, p50-50*time.Millisecond, base.Quantile(50), p50-50*time.Millisecond-base.Quantile(50))
	return nil
}

// rss returns the process's resident set size in bytes (VmRSS).
func rss() int64 { return procStatusKB("VmRSS:") << 10 }

// procStatusKB returns the figure (kB) of the /proc/self/status line
// that starts with key, 0 when there is none.
func procStatusKB(key string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, key) {
			if f := strings.Fields(line); len(f) > 1 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb
			}
		}
	}
	return 0
}

func memory(urls []string, dur time.Duration, scale float64, log *slog.Logger) error {
	streams, err := seedStreams(urls, dur, scale)
	if err != nil {
		return err
	}
	var at1m int64
	var last int64
	eng, err := run(streams, log, func(eng *load.Engine, clock *event.Clock) {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for range tick.C {
			now := clock.Now()
			if now > dur {
				return
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			r := rss()
			last = r
			if at1m == 0 && now >= time.Minute {
				at1m = r
			}
			sent := int64(0)
			for _, l := range eng.Live(5 * time.Second) {
				sent += l.Sent
			}
			fmt.Printf("memory t=%4.0fs rss=%6.1fMiB heapInuse=%6.1fMiB goroutines=%d sent=%d\n",
				now.Seconds(), float64(r)/(1<<20), float64(ms.HeapInuse)/(1<<20), runtime.NumGoroutine(), sent)
		}
	})
	if err != nil {
		return err
	}
	if at1m > 0 {
		fmt.Printf("memory: rss at 1 min %.1f MiB, at %s %.1f MiB, ratio %.3f\n", float64(at1m)/(1<<20), dur, float64(last)/(1<<20), float64(last)/float64(at1m))
	}
	fmt.Printf("memory validity: %v\n", errOrOK(eng.Validity()))
	return nil
}
