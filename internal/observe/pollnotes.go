package observe

import "time"

// pollState follows a poller's failures so that it notes the first
// failure, each change of error, and the recovery, not every failed poll.
type pollState struct {
	failing   bool
	lastErr   string
	failCount int
	failSince time.Duration
}

// result takes the outcome of the poll that started at at (run's clock)
// and returns the note to record, or "" for none: the error's text on a
// first failure or a changed error, recovered(count, since) when a poll
// succeeds after failures.
func (p *pollState) result(at time.Duration, err error, recovered func(failed int, since time.Duration) string) string {
	if err != nil {
		msg := err.Error()
		if !p.failing {
			p.failing, p.failCount, p.failSince = true, 0, at
		}
		p.failCount++
		note := ""
		if p.failCount == 1 || msg != p.lastErr {
			note = msg
		}
		p.lastErr = msg
		return note
	}
	if p.failing {
		note := recovered(p.failCount, p.failSince)
		p.failing, p.lastErr = false, ""
		return note
	}
	return ""
}
