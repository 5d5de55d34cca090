// Package e2e holds end-to-end tests that run the drill binary as a child
// process against real parts: a toxiproxy-server built from the module, a
// throwaway PostgreSQL and local services. signals_test.go interrupts
// `drill run` with SIGINT, SIGTERM and SIGKILL at several points of a fault
// and checks that nothing of the run remains (docs/DESIGN.md §15, §16).
package e2e
