package scenario

import "fmt"

// The fault kinds that are Toxiproxy toxics. Each adds one toxic per
// stream direction to a proxy (two for stream both) and removes it on
// revert; stream (default downstream) and toxicity (default 1) apply to
// all of them. See Toxiproxy's docs for the toxics' semantics.
const (
	FaultLatency   FaultType = "latency"    // latency (ms), jitter (ms)
	FaultTimeout   FaultType = "timeout"    // timeout (ms); 0 = pause (hold data until removed)
	FaultBandwidth FaultType = "bandwidth"  // rate (KB/s)
	FaultSlowClose FaultType = "slow_close" // delay (ms)
	FaultResetPeer FaultType = "reset_peer" // timeout (ms)
	FaultSlicer    FaultType = "slicer"     // averageSize, sizeVariation (bytes), delay (µs)
	FaultLimitData FaultType = "limit_data" // bytes
)

var latencySpec = FaultSpec{
	Type:   FaultLatency,
	Target: TargetProxy,
	Toxic:  "latency",
	Attrs:  []FaultAttr{{Key: "latency", Required: true}, {Key: "jitter"}},
	Doc: "Delays every chunk of data in the stream's direction by latency ± jitter, " +
		"counted from when the proxy read the chunk. Both are sent to Toxiproxy in whole " +
		"milliseconds (rounded); jitter defaults to 0 and must not exceed latency.",
	Example: `- name: pg-slow
  type: latency
  proxy: postgres
  latency: 200ms
  jitter: 50ms
  stream: both
  at: 20s
  for: 15s`,
	// jitter <= latency is the jitter key's rule (faultAttrDefs).
	Check: wholeMillisKeys("latency", "jitter"),
}

var timeoutSpec = FaultSpec{
	Type:   FaultTimeout,
	Target: TargetProxy,
	Toxic:  "timeout",
	Attrs:  []FaultAttr{{Key: "timeout"}},
	Doc: "A black hole: every byte in the stream's direction is dropped and the connection " +
		"is closed after timeout (whole milliseconds). timeout 0 (the default) holds every " +
		"connection open until the fault ends: a pause, the way a frozen or partitioned " +
		"database looks (connections stay established, clients hang until their own " +
		"timeouts fire). When the fault ends Toxiproxy closes the connections it held, so " +
		"a query blocked in the pause fails right after it; compare process-pause, where " +
		"held connections resume.",
	Example: `- name: pg-pause
  type: timeout
  proxy: postgres
  timeout: 0s
  stream: both
  at: 20s
  for: 15s`,
	Defaults: defaultZeroTimeout,
	Check:    wholeMillisKeys("timeout"),
}

var bandwidthSpec = FaultSpec{
	Type:   FaultBandwidth,
	Target: TargetProxy,
	Toxic:  "bandwidth",
	Attrs:  []FaultAttr{{Key: "rateKBps", Required: true}},
	Doc: "Limits the stream's direction to rateKBps kilobytes per second " +
		"(1 KB = 1000 bytes), above 0.",
	Example: `- name: api-narrow
  type: bandwidth
  proxy: tax-api
  rateKBps: 10
  at: 20s
  for: 30s`,
	Check: func(f *Fault, report func(key, msg string)) {
		// A negative rate is refused for every kind (faultAttrDefs).
		if f.RateKBps != nil && *f.RateKBps == 0 {
			report("rateKBps", "rateKBps must be above 0 (Toxiproxy reads 0 as unlimited, which is no fault)")
		}
	},
}

var slowCloseSpec = FaultSpec{
	Type:   FaultSlowClose,
	Target: TargetProxy,
	Toxic:  "slow_close",
	Attrs:  []FaultAttr{{Key: "delay", Required: true}},
	Doc: "Lets data pass but holds back the close after end of stream by delay " +
		"(whole milliseconds).",
	Example: `- name: api-slow-close
  type: slow_close
  proxy: tax-api
  delay: 2s
  at: 20s
  for: 30s`,
	Check: wholeMillisKeys("delay"),
}

var resetPeerSpec = FaultSpec{
	Type:   FaultResetPeer,
	Target: TargetProxy,
	Toxic:  "reset_peer",
	Attrs:  []FaultAttr{{Key: "timeout"}},
	Doc: "On the first chunk in the stream's direction waits timeout (whole milliseconds; " +
		"default 0: at once) and closes the connection with a TCP reset. Only connections " +
		"opened while the fault is on are reset; older ones get a clean close.",
	Example: `- name: pg-reset
  type: reset_peer
  proxy: postgres
  timeout: 0s
  at: 20s
  for: 10s`,
	Defaults: defaultZeroTimeout,
	Check:    wholeMillisKeys("timeout"),
}

var slicerSpec = FaultSpec{
	Type:   FaultSlicer,
	Target: TargetProxy,
	Toxic:  "slicer",
	Attrs:  []FaultAttr{{Key: "averageSize", Required: true}, {Key: "sizeVariation"}, {Key: "delay"}},
	Doc: "Splits the data into writes of averageSize ± sizeVariation bytes, delay apart " +
		"(whole microseconds, default 0). averageSize is above 0; sizeVariation defaults " +
		"to 0 and stays below averageSize.",
	Example: `- name: api-sliced
  type: slicer
  proxy: tax-api
  averageSize: 64
  sizeVariation: 32
  delay: 10us
  at: 20s
  for: 30s`,
	Check: func(f *Fault, report func(key, msg string)) {
		if f.AverageSize != nil && *f.AverageSize <= 0 {
			report("averageSize", "averageSize must be above 0")
		}
		// sizeVariation < averageSize is the sizeVariation key's rule
		// (faultAttrDefs).
		if f.Delay != nil && f.Delay.D() > 0 && f.Delay.D().Microseconds() == 0 {
			report("delay", fmt.Sprintf("delay %s is below 1µs, the slicer's unit", f.Delay.D()))
		}
	},
}

var limitDataSpec = FaultSpec{
	Type:   FaultLimitData,
	Target: TargetProxy,
	Toxic:  "limit_data",
	Attrs:  []FaultAttr{{Key: "bytes", Required: true}},
	Doc: "Lets each connection pass bytes (above 0) in the stream's direction, " +
		"then closes it.",
	Example: `- name: api-cut
  type: limit_data
  proxy: tax-api
  bytes: 1KiB
  at: 20s
  for: 30s`,
	Check: func(f *Fault, report func(key, msg string)) {
		if f.Bytes != nil && *f.Bytes <= 0 {
			report("bytes", "bytes must be above 0")
		}
	},
}

// defaultZeroTimeout sets an unset timeout to 0 (timeout: a pause; reset_peer:
// reset at once).
func defaultZeroTimeout(f *Fault) {
	if f.Timeout == nil {
		f.Timeout = &Duration{}
	}
}
