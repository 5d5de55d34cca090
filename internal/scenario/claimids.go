package scenario

import "regexp"

// claimTokenRE finds the ids of the source documents' claims in free
// text: a clause id with an optional .n (MC-PS-01, MC-PS-01.2,
// INV-HLT-03), a document id (HEALTH-ORD-001), or the numbered claims of
// the documents without ids (ADR0077-4, TUT-7).
var claimTokenRE = regexp.MustCompile(`\b(?:[A-Z]{2,}-[A-Z]{2,}-[0-9]{2,}(?:\.[0-9]+)?|ADR0077-[0-9]+|TUT-[0-9]+)\b`)

// ClaimIDs returns the claim, clause and document ids that text (an
// assertion's or a claim's source, a metadata.sources entry) names, in
// order of appearance, each once. docs/CLAIMS.md lists the claims these
// ids name; internal/claims checks that every id an assertion names is
// one of them.
func ClaimIDs(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range claimTokenRE.FindAllString(text, -1) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
