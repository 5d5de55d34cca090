// Package docs holds drill's design document, DESIGN.md, and the test that
// keeps it true: its package map must equal `go list ./...`, every
// citation of one of its sections (written "docs/DESIGN.md §N") anywhere
// in the repository must name a section it has, and Go comments must not
// cite issue numbers. It also checks scenarios/k8s/README.md's account of
// which assertions the kubernetes drills carry against the scenario files,
// that every relative link and #fragment in the Markdown pages (README.md,
// CONTRIBUTING.md, docs/, scenarios/, test/controlplane/README.md) names a
// file and heading that exist, and that README.md stays a landing page of
// at most 300 lines.
package docs
