package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/drillhq/drill/internal/load"
)

// warmTraffic sends a few requests of every stream's first inline target,
// as the load engine sends them (load.Requests: ${...} expanded, headers,
// basicAuth, the body template rendered with a warm-up ID).
func (tl *timeline) warmTraffic(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var errs []error
	for i := 0; i < 5; i++ {
		for si, reqs := range tl.warm {
			if reqs == nil {
				continue
			}
			data := load.BodyData{ID: fmt.Sprintf("%s-warm-%d-%d", tl.r.id, si, i), Time: time.Now().UTC().Format(time.RFC3339Nano)}
			req, err := reqs.Request(ctx, 0, data)
			if err != nil {
				return fmt.Errorf("streams[%d]: %w", si, err)
			}
			resp, err := client.Do(req)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	if len(errs) > 0 && len(errs) == 5*len(tl.streams) {
		return errors.Join(errs...)
	}
	return nil
}
