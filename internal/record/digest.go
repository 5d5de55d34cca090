package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/drillhq/drill/internal/scenario"
)

// ScenarioDigest returns "sha256:" and the hex SHA-256 of the canonical
// form of s: its redacted JSON encoding (map keys sorted, secrets
// replaced, so a rotated token does not change it) without what only
// judges or describes a run: the metadata other than the name, the
// assertions, the claims and the compare section. Two runs with the same
// digest drove the same load against the same system with the same
// faults on the same timeline, so their figures compare; re-judging with
// other bounds (drill report --set) keeps the digest. It returns an error
// only when the scenario cannot be encoded.
func ScenarioDigest(s *scenario.Scenario) (string, error) {
	if s == nil {
		return "", fmt.Errorf("scenario digest: no scenario")
	}
	c := *s.Redacted(s.Redactor())
	c.Metadata = scenario.Metadata{Name: s.Metadata.Name}
	c.Assertions, c.Claims, c.Compare = nil, nil, nil
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("scenario digest of %s: %w", s.Metadata.Name, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
