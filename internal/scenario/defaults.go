package scenario

import (
	"fmt"
	"time"

	"github.com/drillhq/drill/internal/measure"
)

// The lag budget's defaults are the lag rule's own, written once in
// internal/measure.
const (
	DefaultLagLate     = measure.DefaultLateAfter    // LagBudget.Late
	DefaultLagFraction = measure.DefaultLateFraction // LagBudget.Fraction
)

// Defaults applied by [Scenario.SetDefaults]; each field's doc comment
// (beside its type, in its section's file) names its default too.
const (
	DefaultRecovery         = 10 * time.Second      // Timeline.Recovery
	DefaultReadyTimeout     = 120 * time.Second     // Timeline.ReadyTimeout
	DefaultPostgresDatabase = "drill"               // PostgresDep.Database
	DefaultPostgresUser     = "drill"               // PostgresDep.User
	DefaultPostgresImage    = "postgres:16-alpine"  // PostgresDep.Image
	DefaultMaxConnections   = 300                   // PostgresDep.MaxConnections
	DefaultStubStatus       = 200                   // HTTPStubDep.Status
	DefaultStubBody         = "{}"                  // HTTPStubDep.Body
	DefaultStubContentType  = "application/json"    // HTTPStubDep.ContentType
	DefaultListen           = "127.0.0.1:0"         // Proxy.Listen, Service.Listen
	DefaultBuild            = "correct"             // Service.Build
	DefaultGracePeriod      = int64(30)             // Service.TerminationGracePeriodSeconds, s
	DefaultProbePeriod      = int32(10)             // Probe.PeriodSeconds, s
	DefaultProbeTimeout     = int32(1)              // Probe.TimeoutSeconds, s
	DefaultProbeSuccess     = int32(1)              // Probe.SuccessThreshold
	DefaultProbeFailure     = int32(3)              // Probe.FailureThreshold
	DefaultRequestTimeout   = 5 * time.Second       // Stream.Timeout
	DefaultMethod           = "GET"                 // Target.Method
	DefaultTargetsFormat    = "http"                // TargetsFile.Format
	DefaultRetryInterval    = 50 * time.Millisecond // Retry.Interval
	DefaultRetryMaxAttempts = 3                     // Retry.MaxAttempts
	DefaultFaultStream      = "downstream"          // Fault.Stream (toxics)
	DefaultToxicity         = 1.0                   // Fault.Toxicity (toxics)
	DefaultObserverInterval = time.Second           // ProbeObserver, MetricsObserver .Interval
	DefaultObserverTimeout  = time.Second           // ProbeObserver.Timeout
	DefaultPromQLInterval   = 5 * time.Second       // PromQLObserver.Interval
	DefaultStopAction       = StopEndFaults         // StopCondition.Action
	DefaultWindow           = "run"                 // Assertion.Window
	DefaultPercentile       = Percentile(99)        // Assertion.Percentile (latency, endpoint-removal)
	DefaultMinRatio         = 0.995                 // Assertion.MinRatio (throughput)
	DefaultHold             = 2 * time.Second       // Assertion.Hold (recovery)
	DefaultStatusClass      = "any"                 // Assertion.StatusClass (error-rate)
	DefaultHTTPScheme       = "HTTP"                // HTTPGetAction.Scheme
	DefaultSetupTimeout     = 5 * time.Minute       // Setup.Timeout
)

// DefaultShedStatus is the default of Assertion.Status for shed assertions.
var DefaultShedStatus = []int{503, 429}

// DefaultRetryOn is the default of Retry.On (plus transport errors).
var DefaultRetryOn = []int{429, 502, 503, 504}

// SetDefaults fills every unset field with its documented default. It is
// idempotent and only fills fields that apply (e.g. Toxicity only for
// toxics, Percentile only for latency and endpoint-removal assertions), so
// [Scenario.Validate] can still tell which fields the user wrote.
func (s *Scenario) SetDefaults() {
	if s.Environment.Type == "" {
		s.Environment.Type = EnvLocal
	}
	if s.Environment.Type == EnvLocal {
		if s.Environment.Local == nil {
			s.Environment.Local = &LocalEnv{}
		}
		setIf(&s.Environment.Local.SUTPriority, SUTPriorityLower)
		if s.Environment.Local.EndpointLag == nil {
			s.Environment.Local.EndpointLag = &Duration{DefaultEndpointLag}
		}
	}
	if k := s.Environment.Kubernetes; k != nil && len(k.AllowedNamespaces) == 0 && k.Namespace != "" {
		k.AllowedNamespaces = []string{k.Namespace}
	}
	t := &s.Timeline
	if t.Recovery.Duration == 0 {
		t.Recovery.Duration = DefaultRecovery
	}
	if t.ReadyTimeout.Duration == 0 {
		t.ReadyTimeout.Duration = DefaultReadyTimeout
	}
	for i := range s.Dependencies {
		if p := s.Dependencies[i].Postgres; p != nil {
			setIf(&p.Mode, PostgresAuto)
			setIf(&p.Database, DefaultPostgresDatabase)
			setIf(&p.User, DefaultPostgresUser)
			setIf(&p.Image, DefaultPostgresImage)
			setIf(&p.MaxConnections, DefaultMaxConnections)
		}
		if h := s.Dependencies[i].HTTPStub; h != nil {
			setIf(&h.Status, DefaultStubStatus)
			setIf(&h.Body, DefaultStubBody)
			setIf(&h.ContentType, DefaultStubContentType)
		}
	}
	for i := range s.Proxies {
		setIf(&s.Proxies[i].Listen, DefaultListen)
	}
	for i := range s.Services {
		svc := &s.Services[i]
		if svc.Reference != "" {
			setIf(&svc.Build, DefaultBuild)
		}
		if s.Environment.Type == EnvLocal {
			setIf(&svc.Replicas, 1)
			setIf(&svc.Listen, DefaultListen)
		}
		if svc.Setup != nil && svc.Setup.Timeout.Duration == 0 {
			if _, wrote := s.Positions[fmt.Sprintf("services[%d].setup.timeout", i)]; !wrote {
				svc.Setup.Timeout.Duration = DefaultSetupTimeout
			}
		}
		if svc.TerminationGracePeriodSeconds == nil {
			g := DefaultGracePeriod
			svc.TerminationGracePeriodSeconds = &g
		}
		for _, p := range []*Probe{svc.Probes.StartupProbe, svc.Probes.LivenessProbe, svc.Probes.ReadinessProbe} {
			if p == nil {
				continue
			}
			setIf(&p.PeriodSeconds, DefaultProbePeriod)
			setIf(&p.TimeoutSeconds, DefaultProbeTimeout)
			setIf(&p.SuccessThreshold, DefaultProbeSuccess)
			setIf(&p.FailureThreshold, DefaultProbeFailure)
			if p.HTTPGet != nil {
				setIf(&p.HTTPGet.Scheme, DefaultHTTPScheme)
			}
		}
	}
	for i := range s.Streams {
		st := &s.Streams[i]
		if st.Duration.Duration == 0 {
			if len(st.Steps) > 0 {
				for _, step := range st.Steps {
					st.Duration.Duration += step.For.Duration
				}
			} else if t.Duration.Duration > st.Start.Duration {
				st.Duration.Duration = t.Duration.Duration - st.Start.Duration
			}
		}
		// A written "timeout: 0s" stays 0 so that Validate refuses it
		// rather than silently running with the default.
		if _, wrote := s.Positions[fmt.Sprintf("streams[%d].timeout", i)]; st.Timeout.Duration == 0 && !wrote {
			st.Timeout.Duration = DefaultRequestTimeout
		}
		if st.KeepAlive == nil {
			ka := true
			st.KeepAlive = &ka
		}
		for j := range st.Targets {
			setIf(&st.Targets[j].Method, DefaultMethod)
		}
		if st.TargetsFile != nil {
			setIf(&st.TargetsFile.Format, DefaultTargetsFormat)
		}
		if r := st.Retry; r != nil && r.Policy != RetryNone {
			if r.Interval.Duration == 0 {
				r.Interval.Duration = DefaultRetryInterval
			}
			setIf(&r.MaxAttempts, DefaultRetryMaxAttempts)
			if len(r.On) == 0 {
				r.On = append([]int(nil), DefaultRetryOn...)
			}
		}
		if st.LagBudget == nil {
			st.LagBudget = &LagBudget{}
		}
		if st.LagBudget.Late.Duration == 0 {
			st.LagBudget.Late.Duration = DefaultLagLate
		}
		setIf(&st.LagBudget.Fraction, DefaultLagFraction)
	}
	for i := range s.Faults {
		setFaultDefaults(&s.Faults[i])
	}
	for i := range s.Observers.Probes {
		o := &s.Observers.Probes[i]
		setIf(&o.Interval.Duration, DefaultObserverInterval)
		setIf(&o.Timeout.Duration, DefaultObserverTimeout)
	}
	for i := range s.Observers.Metrics {
		setIf(&s.Observers.Metrics[i].Interval.Duration, DefaultObserverInterval)
	}
	for i := range s.Observers.Postgres {
		setIf(&s.Observers.Postgres[i].Interval.Duration, DefaultObserverInterval)
	}
	for i := range s.Observers.PromQL {
		setIf(&s.Observers.PromQL[i].Interval.Duration, DefaultPromQLInterval)
	}
	for i := range s.StopConditions {
		setIf(&s.StopConditions[i].Action, DefaultStopAction)
	}
	for i := range s.Assertions {
		s.defaultAssertion(&s.Assertions[i])
	}
}

// setIf sets *p to v when *p is the zero value.
func setIf[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}
