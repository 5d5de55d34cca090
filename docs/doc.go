// Package docs holds drill's design document, DESIGN.md, and the test that
// keeps it true: its package map must equal `go list ./...`, every
// citation of one of its sections (written "docs/DESIGN.md §N") anywhere
// in the repository must name a section it has, and Go comments must not
// cite issue numbers. It also checks scenarios/k8s/README.md's account of
// which assertions the kubernetes drills carry against the scenario files.
package docs
