package claims

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CheckSpecs ties the ledger to the documents in dir (../shared/specs/
// beside the repository): every document's file must exist, every claim's
// quote must be in its document (runs of whitespace compare equal), and
// every clause id the document writes (ClauseRE: MC-PS-01, DEC-BH-01)
// must be the document's own id, a claim's id, or a clause the ledger
// splits into .n claims. The error is [Problems], each naming the data
// file's line or the document.
func CheckSpecs(l *Ledger, dir string) error {
	var ps Problems
	ids := l.claimByID()
	for _, d := range l.Documents {
		path := filepath.Join(dir, d.File)
		data, err := os.ReadFile(path)
		if err != nil {
			ps = append(ps, Problem{File: l.File, Field: d.ID, Msg: fmt.Sprintf("read the document: %v", err)})
			continue
		}
		text := squeeze(string(data))
		for _, c := range d.Claims {
			if !strings.Contains(text, squeeze(c.Quote)) {
				ps = append(ps, Problem{File: l.File, Line: c.Line, Field: c.ID, Msg: fmt.Sprintf("the quote is not in %s (quote the document exactly)", d.File)})
			}
		}
		seen := map[string]bool{}
		var missing []string
		for _, id := range ClauseRE.FindAllString(string(data), -1) {
			if seen[id] {
				continue
			}
			seen[id] = true
			if id == d.ID || ids[id] != nil || len(l.split(id)) > 0 {
				continue
			}
			missing = append(missing, id)
		}
		sort.Strings(missing)
		for _, id := range missing {
			ps = append(ps, Problem{File: path, Field: id, Msg: fmt.Sprintf("clause id of %s missing from the ledger %s: add its claims", d.ID, l.File)})
		}
	}
	return ps.orNil()
}

// squeeze collapses every run of whitespace to one space.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
