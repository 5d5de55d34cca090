// Package testutil holds test helpers shared by drill's packages: real local
// dependencies that clean up after the test.
package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drillhq/drill/internal/dependencies"
	"github.com/drillhq/drill/internal/scenario"
	"github.com/drillhq/drill/internal/testutil/needs"
)

// Postgres starts a throwaway PostgreSQL from the machine's binaries (user and
// database "drill", DSN in the result) and closes it in t.Cleanup. It skips
// the test, saying why, only when the binaries are missing (under CI=true it
// fails it: see package needs); any other failure fails the test.
func Postgres(tb testing.TB) *dependencies.Postgres {
	tb.Helper()
	return PostgresWith(tb, scenario.PostgresDep{Mode: scenario.PostgresBinaries})
}

// PostgresWith is [Postgres] with a spec (e.g. InitSQL, MaxConnections).
// An empty Mode means binaries.
func PostgresWith(tb testing.TB, spec scenario.PostgresDep) *dependencies.Postgres {
	tb.Helper()
	if spec.Mode == "" {
		spec.Mode = scenario.PostgresBinaries
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg, err := dependencies.StartPostgres(ctx, spec, nil)
	if errors.Is(err, dependencies.ErrNoPostgres) {
		needs.Part(tb, "PostgreSQL server binaries", err)
	}
	if err != nil {
		tb.Fatalf("start postgres: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pg.Close(ctx); err != nil {
			tb.Errorf("close postgres: %v", err)
		}
	})
	return pg
}

// HTTPStub starts a stub HTTP service and closes it in t.Cleanup.
func HTTPStub(tb testing.TB, spec scenario.HTTPStubDep) *dependencies.HTTPStub {
	tb.Helper()
	s, err := dependencies.StartHTTPStub(context.Background(), spec)
	if err != nil {
		tb.Fatalf("start http stub: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close http stub: %v", err)
		}
	})
	return s
}
