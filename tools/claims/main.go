// Command claims writes docs/CLAIMS.md, drill's claims ledger, from the
// claims data file (docs/claims/claims.yaml), the source documents
// (../shared/specs/ beside the repository) and the shipped scenarios
// (internal/claims says how). `make claims` runs it from the repository
// root.
//
//	go run ./tools/claims                 # write docs/CLAIMS.md
//	go run ./tools/claims -check          # exit 1 when docs/CLAIMS.md is stale
//
// Exit codes: 0 written (or up to date), 1 stale (-check), 2 bad input
// (each problem printed with its file and line), 3 the ledger could not
// be read or written.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/drillhq/drill/internal/claims"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("claims", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the repository root")
	data := fs.String("data", "docs/claims/claims.yaml", "the claims data file, relative to -root")
	specs := fs.String("specs", "", "the source documents (default: -root/../shared/specs)")
	out := fs.String("o", "docs/CLAIMS.md", "the ledger to write, relative to -root")
	check := fs.Bool("check", false, "do not write: exit 1 when the ledger differs from what would be written")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "claims: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *specs == "" {
		*specs = filepath.Join(*root, "..", "shared", "specs")
	}
	want, err := claims.Generate(*root, *data, *specs)
	var ps claims.Problems
	switch {
	case errors.As(err, &ps):
		for _, p := range ps {
			fmt.Fprintln(stderr, p.String())
		}
		fmt.Fprintf(stderr, "claims: %d problem(s); %s not written\n", len(ps), *out)
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "claims:", err)
		return 2
	}
	path := filepath.Join(*root, filepath.FromSlash(*out))
	if *check {
		got, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(stderr, "claims:", err)
			return 3
		}
		if !bytes.Equal(got, want) {
			fmt.Fprintf(stderr, "claims: %s is stale; run: %s\n", *out, claims.Command)
			return 1
		}
		fmt.Fprintf(stdout, "%s is up to date\n", *out)
		return 0
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		fmt.Fprintln(stderr, "claims:", err)
		return 3
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return 0
}
