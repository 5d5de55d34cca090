package measure

import "time"

// The lag rule: whether an open-model load generator kept to its schedule.
//
// Every hit of a stream is due at its intended send time. A hit is late
// when it went out more than the budget's LateAfter after that time, and a
// hit that never went out at all (the generator fell so far behind that
// the stream ended, or was stopped, first) is late too: an open-model
// generator owes every hit its schedule intended. Over a span, the late
// share is
//
//	(late + missed) / due
//
// where missed = max(intended - sent, 0) and due = max(intended, sent)
// (intended is 0 where the schedule is unknown: the as-fast-as-possible
// mode, or records written before intended counts were kept; the share
// is then late/sent). The measurement is invalid (exit 4) when the late
// share is above the budget's Fraction. This file is the only place the
// rule and its default are written: drill run (through internal/record's
// CheckLag over the judged span) and drill load (through the load
// engine's Validity over each stream's whole span) both judge with it.

// Default lag budget of a stream (scenario key lagBudget): at most 1 % of
// the requests due may go out more than 10 ms late or never.
const (
	// DefaultLateAfter is the dispatch lag beyond which a request counts
	// as late (10 ms).
	DefaultLateAfter = 10 * time.Millisecond
	// DefaultLateFraction is the share (0..1) of late requests allowed.
	DefaultLateFraction = 0.01
)

// LagBudget bounds how far behind its schedule a stream's generator may
// fall; zero fields take the defaults ([LagBudget.OrDefault]).
type LagBudget struct {
	// LateAfter is the dispatch lag beyond which a request counts as late.
	LateAfter time.Duration
	// Fraction is the share (0..1) of late or never-sent requests allowed.
	Fraction float64
}

// OrDefault returns b with its zero (or negative) fields set to
// [DefaultLateAfter] and [DefaultLateFraction].
func (b LagBudget) OrDefault() LagBudget {
	if b.LateAfter <= 0 {
		b.LateAfter = DefaultLateAfter
	}
	if b.Fraction <= 0 {
		b.Fraction = DefaultLateFraction
	}
	return b
}

// Exceeded reports whether c's late share is above the budget's fraction
// (defaults applied): the generator fell behind and the measurement is
// invalid.
func (b LagBudget) Exceeded(c LagCount) bool {
	return c.Fraction() > b.OrDefault().Fraction
}

// LagCount is a span's dispatch account, the input of the lag rule.
type LagCount struct {
	// Intended counts the hits the schedule asked for (0: unknown).
	Intended int64
	// Sent counts the requests that went out.
	Sent int64
	// Late counts sent requests whose lag exceeded the budget's LateAfter.
	Late int64
}

// LagCount returns b's dispatch account: Intended, Requests as sent, Late.
func (b *Bucket) LagCount() LagCount {
	return LagCount{Intended: b.Intended, Sent: b.Requests, Late: b.Late}
}

// Missed counts the hits intended and never sent.
func (c LagCount) Missed() int64 { return max(c.Intended-c.Sent, 0) }

// Due counts the hits the span owed: the intended ones, or the sent ones
// where more went out (or the schedule is unknown).
func (c LagCount) Due() int64 { return max(c.Intended, c.Sent) }

// Fraction is the late share (late + missed) / due, 0..1; 0 when nothing
// was due.
func (c LagCount) Fraction() float64 {
	due := c.Due()
	if due <= 0 {
		return 0
	}
	return float64(c.Late+c.Missed()) / float64(due)
}
