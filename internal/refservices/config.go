package refservices

import (
	"errors"
	"fmt"
	"time"
)

// Defaults every reference service shares.
const (
	// DefaultReadyTimeout bounds the readiness SELECT 1 on the dedicated
	// connection (HEALTH-ORD-001 MC-PS-01): 250 ms.
	DefaultReadyTimeout = 250 * time.Millisecond
	// DefaultWatchdogInterval is the liveness watchdog's kick period: 100 ms.
	DefaultWatchdogInterval = 100 * time.Millisecond
	// DefaultWatchdogStall is the kick age at which liveness fails: 5 s.
	DefaultWatchdogStall = 5 * time.Second
)

// ValidateBase checks the settings every reference service requires and
// returns one error per invalid one, named by its flag: --build must name a
// [Build] and --database-url must not be empty. Callers join them with
// their own checks.
func ValidateBase(build Build, databaseURL string) []error {
	var errs []error
	if _, err := ParseBuild(string(build)); err != nil {
		errs = append(errs, fmt.Errorf("--build: %w", err))
	}
	if databaseURL == "" {
		errs = append(errs, errors.New("--database-url (or DATABASE_URL): required"))
	}
	return errs
}
