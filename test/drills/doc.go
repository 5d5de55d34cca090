// Package drills is drill's own proof that it catches what it claims to
// catch (docs/DESIGN.md §17): every shipped drill in scenarios/ has a
// twin that differs only in the reference build it runs, and
// TestDrillPairs runs a shortened variant of each pair
// (testdata/scenarios/drills/) with the drill binary as a child process. The correct build must pass (exit 0); the naive build
// must fail (exit 1) on the assertion the drill exists for:
//
//   - orders-db-brownout: no-restarts, with evidence naming the liveness
//     probe (HEALTH-ORD-001 MC-CF-01, INV-HLT-01, INC-3119);
//   - payment-tax-brownout: auth-p99 (BULKHEAD-PAY-001 MC-RT-01, INV-BH-01,
//     INC-4491);
//   - orders-overload-routing: routed-through-overload or no-flaps, the
//     readiness that queues behind the request pool (ADR 0077).
//
// An invalid measurement (exit 4, e.g. the load generator fell behind its
// schedule) fails the test with drill's validity message: it is never taken
// as a pass or as the naive build's failure.
//
// The six runs go one after another (about 5 minutes on a 2-core machine)
// and need PostgreSQL's server binaries (initdb, postgres), found as drill
// finds them: on PATH or in /usr/lib/postgresql/<version>/bin. Without them
// the test skips, saying so, or under CI=true fails. -short skips them.
// DRILL_DRILLS_KEEP=1 keeps every run's reports (run.json, junit.xml,
// report.html, replica logs); a failed test keeps them anyway and logs
// where.
package drills
