// Package refservices holds what drill's reference services share: the build
// switch (correct or naive), the settings and skeleton every service is
// built on ([Settings], [Base]: logger, health endpoints, metrics registry,
// routes and background goroutines), the HTTP serving loop with graceful
// shutdown, the in-process liveness watchdog, the dedicated readiness
// connection to PostgreSQL, the startup latch, the request pools with
// schema creation that tolerates concurrent replicas, and RFC 9457 problem
// responses.
//
// The services themselves live in the sub-packages
// [github.com/drillhq/drill/internal/refservices/ordergateway] (HEALTH-ORD-001,
// ADR 0077) and [github.com/drillhq/drill/internal/refservices/paymentcore]
// (BULKHEAD-PAY-001). `drill serve NAME` runs one of them as a process; the
// local runtime runs such processes as replicas.
package refservices

import (
	"fmt"
	"sort"
	"strings"
)

// Build selects which implementation of a reference service runs.
type Build string

// Builds.
const (
	// BuildCorrect implements the spec (HEALTH-ORD-001 / BULKHEAD-PAY-001).
	BuildCorrect Build = "correct"
	// BuildNaive reproduces the incident the spec was written after
	// (INC-3119 for order-gateway, INC-4491 for payment-core).
	BuildNaive Build = "naive"
)

// ParseBuild returns the Build named s ("" means correct). The error names
// the valid builds.
func ParseBuild(s string) (Build, error) {
	switch Build(s) {
	case "", BuildCorrect:
		return BuildCorrect, nil
	case BuildNaive:
		return BuildNaive, nil
	}
	valid := []string{string(BuildCorrect), string(BuildNaive)}
	sort.Strings(valid)
	return "", fmt.Errorf("unknown build %q; available: %s", s, strings.Join(valid, ", "))
}
