// Command testsum turns `go test -json` into the log `make test` prints and
// keeps count of what did not run, so a reader of a CI log sees every
// skipped test and every rerun drill with its reason.
//
// Filter mode (the default) reads `go test -json` events on stdin and
// prints what `go test` without -v prints (each package's ok/FAIL line,
// build errors, the whole output of a failing test) plus one "--- PASS"
// line for every test or subtest that ran for -slow or longer (the drill
// pairs, the end-to-end runs), so the log shows the proof ran rather than
// that it was skipped. Lines that are not JSON pass through unchanged. With
// -record FILE it appends each skipped test and each rerun (a log line
// holding needs.RerunMarker) to FILE, one JSON object a line. It exits 1
// when a test or a build failed, or when stdin held no test event at all.
//
//	go test -json ./... | testsum -record bin/test-skips.jsonl
//
// Summary mode (-summary FILE) prints one line that counts the skips and
// reruns FILE holds and names each with its package and reason:
//
//	make test: 2 skipped, 1 rerun: skip internal/x TestY (no Docker engine ...); rerun ...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// rerunMarker is needs.RerunMarker (internal/testutil/needs), written out
// here so the tool stays a leaf; TestRerunMarkerMatchesNeeds keeps the two
// equal.
const rerunMarker = "drill-test-rerun:"

func main() {
	record := flag.String("record", "", "append skipped tests and reruns to this file (JSON lines)")
	summary := flag.String("summary", "", "print the one-line summary of the skips and reruns this file holds, and exit")
	slow := flag.Duration("slow", 5*time.Second, "print a PASS line for each test that ran at least this long")
	flag.Parse()
	if *summary != "" {
		notes, err := readNotes(*summary)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
			os.Exit(2)
		}
		fmt.Println(summaryLine(notes))
		return
	}
	notes, err := filter(os.Stdin, os.Stdout, *slow)
	if *record != "" {
		if werr := appendNotes(*record, notes); werr != nil {
			fmt.Fprintf(os.Stderr, "testsum: %v\n", werr)
			os.Exit(2)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json): Action is run,
// pause, cont, pass, bench, fail, output, skip, start, build-output or
// build-fail; Elapsed is in seconds.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// note is one test that did not run as written: Kind "skip" or "rerun",
// with its package, test name and reason (one line).
type note struct {
	Kind    string `json:"kind"`
	Package string `json:"package"`
	Test    string `json:"test"`
	Reason  string `json:"reason"`
}

// errFailed is returned by filter when a test or a build failed.
var errFailed = errors.New("tests failed")

// filter copies the events read from r to w as text (see the package
// comment) and returns the skips and reruns it saw. Its error is
// errFailed when a test or a build failed, or says that r held no test
// event.
func filter(r io.Reader, w io.Writer, slow time.Duration) ([]note, error) {
	out := bufio.NewWriter(w)
	defer out.Flush()
	// held is each running test's output, printed only if it fails.
	held := map[string][]string{}
	var notes []note
	failed, events := false, 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		events++
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				// go test without -v prints no PASS line before a
				// package's ok line.
				if e.Output != "PASS\n" {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			held[key] = append(held[key], e.Output)
			if i := strings.Index(e.Output, rerunMarker); i >= 0 {
				notes = append(notes, note{Kind: "rerun", Package: e.Package, Test: e.Test,
					Reason: strings.TrimSpace(e.Output[i+len(rerunMarker):])})
			}
		case "skip":
			if e.Test != "" {
				notes = append(notes, note{Kind: "skip", Package: e.Package, Test: e.Test, Reason: skipReason(held[key])})
			}
			delete(held, key)
		case "pass":
			if e.Test != "" && time.Duration(e.Elapsed*float64(time.Second)) >= slow {
				fmt.Fprintf(out, "--- PASS: %s (%.1fs) %s\n", e.Test, e.Elapsed, e.Package)
			}
			delete(held, key)
		case "fail":
			failed = true
			if e.Test != "" {
				for _, o := range held[key] {
					fmt.Fprint(out, o)
				}
				delete(held, key)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return notes, fmt.Errorf("read go test -json: %w", err)
	}
	switch {
	case failed:
		return notes, errFailed
	case events == 0:
		return notes, errors.New("no go test -json event on stdin (did go test run with -json?)")
	}
	return notes, nil
}

// logLine matches the first line of a t.Log, t.Skip or t.Fatal message as
// go test prints it: indented, then file.go:line: and the text.
var logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: `)

// skipReason is the reason a skipped test gave: its last t.Log-style
// message (the t.Skip one), continuation lines joined, without the
// file:line prefix. Output that is not such a message (a library printing
// to stdout) is left out; a test that gave no message has "no reason
// given".
func skipReason(output []string) string {
	var last []string
	open := false // the last line read belongs to the message in last
	for _, o := range output {
		for _, l := range strings.Split(strings.TrimRight(o, "\n"), "\n") {
			switch {
			case logLine.MatchString(l):
				last, open = []string{strings.TrimSpace(l[len(logLine.FindString(l)):])}, true
			case open && strings.HasPrefix(l, "        ") && strings.TrimSpace(l) != "":
				// t.Log indents a message's later lines by 8 spaces.
				last = append(last, strings.TrimSpace(l))
			default:
				open = false
			}
		}
	}
	if len(last) == 0 {
		return "no reason given"
	}
	return strings.Join(last, " ")
}

// appendNotes appends notes to path as JSON lines, creating it.
func appendNotes(path string, notes []note) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("record skips: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, n := range notes {
		if err := enc.Encode(n); err != nil {
			f.Close()
			return fmt.Errorf("record skips in %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record skips in %s: %w", path, err)
	}
	return nil
}

// readNotes reads what appendNotes wrote; a missing file holds none.
func readNotes(path string) ([]note, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read skips: %w", err)
	}
	var notes []note
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var n note
		if err := json.Unmarshal([]byte(l), &n); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		notes = append(notes, n)
	}
	return notes, nil
}

// summaryLine is the one line make test ends with: how many tests were
// skipped and rerun, then each by package (module path dropped), test and
// reason, skips first.
func summaryLine(notes []note) string {
	sort.SliceStable(notes, func(i, j int) bool { return notes[i].Kind > notes[j].Kind })
	skips, reruns := 0, 0
	items := make([]string, 0, len(notes))
	for _, n := range notes {
		if n.Kind == "skip" {
			skips++
		} else {
			reruns++
		}
		pkg := strings.TrimPrefix(n.Package, "github.com/drillhq/drill/")
		items = append(items, fmt.Sprintf("%s %s %s (%s)", n.Kind, pkg, n.Test, n.Reason))
	}
	head := fmt.Sprintf("make test: %d skipped, %d rerun", skips, reruns)
	if len(items) == 0 {
		return head + ": every test ran, none rerun"
	}
	return head + ": " + strings.Join(items, "; ")
}
