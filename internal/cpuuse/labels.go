package cpuuse

import (
	"context"
	"runtime/pprof"
)

// LabelKey is the pprof label drill puts on the goroutines of each of its
// parts, so a CPU profile splits drill's own CPU by part:
//
//	drill run --cpuprofile cpu.pprof scenario.yaml
//	go tool pprof -tags cpu.pprof          # CPU per drill.part value
//	go tool pprof -tagfocus drill.part=generator -top cpu.pprof
//
// Goroutines inherit their creator's labels, so a part's label covers the
// goroutines it starts (connections, timers, toxics).
const LabelKey = "drill.part"

// The values of [LabelKey].
const (
	// PartGenerator is the load engine: the schedule, vegeta's workers,
	// the HTTP client and its connections, with its exchanges with a
	// local Service's endpoints (the Service only picks the endpoint, as
	// kube-proxy does in the kernel).
	PartGenerator = "generator"
	// PartMeasurement is recording results into per-second histograms
	// and packing closed seconds.
	PartMeasurement = "measurement"
	// PartRuntime is the local runtime: replica supervision, kubelet
	// probes, and the local Service's listener for other clients.
	PartRuntime = "probes"
	// PartObservers is the observers (scrapes, probe observers,
	// informers, PromQL) and stop conditions.
	PartObservers = "observers"
	// PartToxiproxy is the embedded Toxiproxy (its proxies, links and
	// toxics) and fault injection.
	PartToxiproxy = "toxiproxy"
	// PartStub is the in-process HTTP stub dependencies.
	PartStub = "stub"
)

// Labelled returns ctx with drill's part label set to part; for
// [pprof.SetGoroutineLabels] on a hot path, where [Do] would allocate per
// call.
func Labelled(ctx context.Context, part string) context.Context {
	return pprof.WithLabels(ctx, pprof.Labels(LabelKey, part))
}

// Do runs fn with the calling goroutine labelled part (and every goroutine
// fn starts, for their whole life), then restores the labels it had.
func Do(ctx context.Context, part string, fn func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(LabelKey, part), fn)
}
