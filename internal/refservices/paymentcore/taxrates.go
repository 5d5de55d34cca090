package paymentcore

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// RateTolerance is the largest relative deviation of a cached rate from the
// authoritative one that ADV-UC-01 accepts: 0.5 %.
const RateTolerance = 0.005

//go:embed rates.json
var cachedRatesJSON []byte

// RateTable maps a jurisdiction code (e.g. "US-CA", "DE") to its tax rate as
// a fraction of the net amount (0.0725 = 7.25 %).
type RateTable struct {
	// Version is the date the table was certified (YYYY-MM-DD).
	Version string `json:"version"`
	// Description says where the rates come from.
	Description string `json:"description,omitempty"`
	// Rates are the rates by jurisdiction, each in (0, 1).
	Rates map[string]float64 `json:"rates"`
}

// CachedRates returns the embedded, certified fallback table. It returns an
// error when the embedded table is invalid ([RateTable.Validate]).
func CachedRates() (RateTable, error) {
	return ParseRateTable(cachedRatesJSON)
}

// ParseRateTable decodes a rate table from JSON and validates it.
func ParseRateTable(data []byte) (RateTable, error) {
	var t RateTable
	if err := json.Unmarshal(data, &t); err != nil {
		return RateTable{}, fmt.Errorf("decode rate table: %w", err)
	}
	if err := t.Validate(); err != nil {
		return RateTable{}, err
	}
	return t, nil
}

// ErrUntestedCompensation is the diagnostic of ADV-UC-01: a fallback table
// with a missing, zero, negative or implausible rate is never used.
var ErrUntestedCompensation = errors.New("ERR_UNTESTED_COMPENSATION_REJECTED")

// Validate checks that the table has a version and at least one rate and
// that every rate is in (0, 1): never a zero rate (ADV-UC-01). Errors wrap
// [ErrUntestedCompensation] and name every bad entry.
func (t RateTable) Validate() error {
	var errs []error
	if t.Version == "" {
		errs = append(errs, errors.New("rate table: version is required"))
	}
	if len(t.Rates) == 0 {
		errs = append(errs, errors.New("rate table: no rates"))
	}
	for _, j := range t.Jurisdictions() {
		r := t.Rates[j]
		if !(r > 0 && r < 1) || math.IsNaN(r) {
			errs = append(errs, fmt.Errorf("rate table: %s: rate %v is not in (0, 1)", j, r))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrUntestedCompensation, errors.Join(errs...))
	}
	return nil
}

// Jurisdictions returns the table's jurisdiction codes, sorted.
func (t RateTable) Jurisdictions() []string {
	js := make([]string, 0, len(t.Rates))
	for j := range t.Rates {
		js = append(js, j)
	}
	sort.Strings(js)
	return js
}

// Rate returns the rate of jurisdiction j and whether the table has it.
func (t RateTable) Rate(j string) (float64, bool) {
	r, ok := t.Rates[j]
	return r, ok
}

// Deviation is |cached - authoritative| / authoritative.
func Deviation(cached, authoritative float64) float64 {
	return math.Abs(cached-authoritative) / authoritative
}

// VerifyAgainst checks the table against an authoritative one: every
// authoritative jurisdiction is present and every rate is within tol
// (relative, e.g. [RateTolerance]). Errors wrap [ErrUntestedCompensation]
// and list every jurisdiction that fails.
func (t RateTable) VerifyAgainst(authority RateTable, tol float64) error {
	var errs []error
	for _, j := range authority.Jurisdictions() {
		want := authority.Rates[j]
		got, ok := t.Rates[j]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: missing from the cached table", j))
			continue
		}
		if d := Deviation(got, want); d > tol {
			errs = append(errs, fmt.Errorf("%s: cached %v deviates %.3f %% from authoritative %v (limit %.3f %%)",
				j, got, d*100, want, tol*100))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrUntestedCompensation, errors.Join(errs...))
	}
	return nil
}

// TaxCents is amountCents × rate rounded half away from zero to a cent.
func TaxCents(amountCents int64, rate float64) int64 {
	return int64(math.Round(float64(amountCents) * rate))
}
