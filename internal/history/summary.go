package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/drillhq/drill/internal/compare"
	"github.com/drillhq/drill/internal/record"
)

// SummaryVersion names the shape of a summary file and the way its figures
// were summarised; a summary of another version is ignored. Change it
// whenever [Summarise] changes.
const SummaryVersion = "drill.dev/history-summary/v2"

// A summary file holds one run's [Night] beside its run.json, so that
// history over many nights reads about 5 KB per night instead of
// decoding every second's latency histograms. For the 150 KB run.json
// files of the short orders drill (testdata/runs/orders-db-brownout-short)
// loading and summarising one took 25-42 ms, reading its summary instead
// (hashing the run.json included) 0.3-0.4 ms, on the shared 2-core
// machine of reports/BENCHMARKS.md (2026-12-02; its history section has
// the 365-night figures). It is a cache: it names the SHA-256 of the run.json
// bytes it summarises and is used only while they match, and deleting it
// loses nothing.
type summaryFile struct {
	// Version is [SummaryVersion].
	Version string `json:"summaryVersion"`
	// RunSHA256 is the hex SHA-256 of the run.json summarised.
	RunSHA256 string `json:"runSha256"`
	// Night is the summary; its Path is not used (the run.json beside
	// it may have moved with it).
	Night Night `json:"night"`
	// Rules are the regression rules of the run's scenario.
	Rules compare.Rules `json:"rules"`
	// Figures are the night's figures in the run's order.
	Figures []summaryFigure `json:"figures"`
}

// summaryFigure is one figure of a summary file.
type summaryFigure struct {
	Key
	Point
}

// SummaryPath returns where the summary of the run record at path is kept:
// beside it, with ".summary.json" for its ".json" (run.json:
// run.summary.json).
func SummaryPath(path string) string {
	return strings.TrimSuffix(path, ".json") + ".summary.json"
}

// WriteSummary writes the summary of run, whose run.json bytes (at path)
// are runJSON, beside path (see [SummaryPath]), through a temporary file
// and a rename so a reader never sees half of it. Whatever writes a
// run.json may call it, so that history never has to load that record.
// It returns an error naming the summary file when it cannot be encoded
// or written.
func WriteSummary(path string, runJSON []byte, run *record.Run) error {
	return writeSummary(path, sha(runJSON), Summarise(path, run))
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeSummary(path, runSHA string, n Night) error {
	out := SummaryPath(path)
	sf := summaryFile{Version: SummaryVersion, RunSHA256: runSHA, Night: n, Rules: n.Rules, Figures: make([]summaryFigure, 0, len(n.Order))}
	sf.Night.Path = ""
	for _, k := range n.Order {
		sf.Figures = append(sf.Figures, summaryFigure{Key: k, Point: n.Figures[k]})
	}
	b, err := json.Marshal(sf)
	if err != nil {
		return fmt.Errorf("write run summary %s: %w", out, err)
	}
	return record.WriteFile(out, "run summary", b)
}

// readSummary returns the night summarised beside path when that summary
// is of [SummaryVersion] and of exactly the run.json bytes whose SHA-256
// is runSHA; ok is false otherwise (missing, damaged, stale).
func readSummary(path, runSHA string) (n Night, ok bool) {
	b, err := os.ReadFile(SummaryPath(path))
	if err != nil {
		return Night{}, false
	}
	var sf summaryFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil || sf.Version != SummaryVersion || sf.RunSHA256 != runSHA || sf.Night.RunID == "" {
		return Night{}, false
	}
	n = sf.Night
	n.Path = path
	n.Rules = sf.Rules
	n.Figures = make(map[Key]Point, len(sf.Figures))
	n.Order = make([]Key, 0, len(sf.Figures))
	for _, f := range sf.Figures {
		if _, dup := n.Figures[f.Key]; dup {
			return Night{}, false
		}
		n.Figures[f.Key] = f.Point
		n.Order = append(n.Order, f.Key)
	}
	return n, true
}

// readNight summarises the run record at path: from its summary file when
// that is current, else by loading the record (and then, with write,
// writing the summary; a summary that cannot be written is no error, the
// next history just loads the record again). Errors name path.
func readNight(path string, write bool) (Night, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Night{}, fmt.Errorf("read run record: %w", err)
	}
	sum := sha(b)
	if n, ok := readSummary(path, sum); ok {
		return n, nil
	}
	run, err := record.Unmarshal(b)
	if err != nil {
		return Night{}, fmt.Errorf("load run record %s: %w", path, err)
	}
	n := Summarise(path, run)
	if write {
		_ = writeSummary(path, sum, n)
	}
	return n, nil
}

// readNights summarises every file, in order, on up to GOMAXPROCS
// goroutines (one run record in memory per goroutine). It returns the
// first file's error in files' order.
func readNights(files []string, write bool) ([]Night, error) {
	nights := make([]Night, len(files))
	err := forEach(len(files), func(i int) (err error) {
		nights[i], err = readNight(files[i], write)
		return err
	})
	if err != nil {
		return nil, err
	}
	return nights, nil
}

// forEach calls f(0) .. f(n-1) on up to GOMAXPROCS goroutines and returns
// the error of the lowest i that failed (nil when none did), so the
// outcome does not depend on scheduling.
func forEach(n int, f func(i int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := range next {
				errs[i] = f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
