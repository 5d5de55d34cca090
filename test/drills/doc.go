// Package drills is drill's own proof that it catches what it claims to
// catch (docs/DESIGN.md §17): every shipped drill in scenarios/ has a naive
// twin, and TestDrillPairs runs a shortened variant of each pair
// (testdata/scenarios/drills/) with the drill binary as a child process.
// The correct build must pass every assertion (exit 0); the naive build
// must fail (exit 1) on exactly the assertions its scenario declares in
// expect.fail, and pass every other, as run.json records the verdicts
// (record.Run.Expectation). The declarations are the scenarios'; the test
// keeps no list of its own. Beyond the verdicts, the naive
// orders-db-brownout, probe-tutorial-latency, orders-cold-start and
// orders-vendor-brownout runs must show their restarts came from the liveness probe, after the fault
// began, and the
// hardened probe-tutorial-latency run must report the tutorial's two
// claimed times beside the measured ones; both orders-rollout runs must
// show the rollout deleting the three old replicas and completing, with
// no restart counted for them; both orders-db-blips runs must show each
// blip failing a readiness probe of every replica, and no replica failing
// three in a row (the drill is about single failed probes).
//
// What a twin changes. Its stream, faults, timeline and assertions are
// the correct drill's; in nine of the ten pairs it runs the reference
// service's naive build (services[].build: naive) and, in five of those,
// the naive build's probes too, as the incidents deployed them; one pair
// changes the probes alone:
//
//   - orders-db-blips: the manifest only (the correct build):
//     manifests/order-gateway-no-hysteresis.yaml instead of
//     order-gateway.yaml, readiness acting on one result
//     (failureThreshold 1, successThreshold 1) instead of 3 and 2, so a
//     single failed probe takes a replica out of routing.
//   - orders-rollout: the build only (same manifest): the naive build
//     exits at once on SIGTERM, the correct one drains.
//   - orders-cold-start: the naive manifest, as orders-db-brownout: no
//     startup probe, so liveness on the deep /health restarts the
//     replacement while it warms up.
//   - orders-vendor-brownout: the naive manifest and build: orders and
//     the deep /health wait for the slow vendor with no timeout, so
//     readiness and liveness fail with it.
//   - payment-tax-brownout: the build only (both drills give payment-core
//     the same inline probes).
//   - payment-tax-timeout: the build only, as payment-tax-brownout.
//   - payment-lane-overload: the build only, and two assertions fewer: the
//     naive build has no card_auth or fraud_eval pool of its own, so its
//     twin does not count those pools' PostgreSQL backends
//     (auth-pool-own-backends, fraud-pool-own-backends).
//   - orders-db-brownout: manifests/order-gateway-naive.yaml instead of
//     order-gateway.yaml: one deep /health (a database query) for liveness
//     and readiness, no startup probe, liveness every 3 s after 5 s with a
//     1 s timeout and readiness every 3 s back after 1 success, against
//     /healthz/live every 10 s with a 2 s timeout, /healthz/ready every
//     5 s back after 2 successes and a startup probe. So the naive twin's
//     liveness gives up after 3 x 3 s of a paused database, the timing
//     of INC-3119.
//   - orders-overload-routing: the same naive manifest instead of the
//     correct drill's inline probes (/healthz/live and /healthz/ready
//     every 10 s with a 5 s timeout, liveness after 6 failures, and a
//     startup probe).
//   - probe-tutorial-latency: manifests/probe-tutorial-api-naive.yaml
//     instead of probe-tutorial-api.yaml: /health for both, no startup
//     probe, liveness every 2 s after 5 s with a 1 s timeout against
//     /healthz/live every 10 s with a 2 s timeout; readiness keeps its
//     5 s period, with a 1 s timeout instead of 2 s.
//
// The shortened variants keep the same differences with their own
// manifests (testdata/scenarios/drills/manifests/), whose periods are
// shorter still: the naive liveness every 1 s against the correct
// build's every 2 s. A naive failure is thus the build and its probes
// together; the payment and rollout pairs isolate the build, the blips
// pair the probes.
//
// An invalid measurement (exit 4, e.g. the load generator fell behind its
// schedule) fails the test with drill's validity message: it is never taken
// as a pass or as the naive build's failure.
//
// The twenty runs go one after another (about 18 minutes on a 2-core
// machine) and need PostgreSQL's server binaries (initdb, postgres), found
// as drill finds them: on PATH or in /usr/lib/postgresql/<version>/bin.
// Without them the test skips, saying so, or under CI=true fails. -short
// skips them. DRILL_DRILLS_KEEP=1 keeps every run's reports (run.json,
// junit.xml, report.html, replica logs); a failed test keeps them anyway
// and logs where.
package drills
