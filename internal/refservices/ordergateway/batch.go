package ordergateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// insertBatch writes a batch of orders in one statement and one round trip.
const insertBatch = `INSERT INTO orders (order_id, payload) SELECT * FROM unnest($1::text[], $2::text[])`

// errNotStarted is returned for orders that arrive before the pool is open.
var errNotStarted = errors.New("the database pool is not open yet")

// order is one queued write; done receives its outcome once.
type order struct {
	ctx     context.Context // the request's; a done ctx is skipped
	id      string
	payload string
	done    chan error // buffered, 1
}

// batcher is a group-commit writer: PoolSize writer goroutines each take
// whatever orders are queued (up to maxBatch) and INSERT them in one
// statement, so throughput does not hang on the database round trip
// (a Toxiproxy hop on a busy 2-core machine costs milliseconds). Each
// batch gets the latest deadline of its orders (or DBTimeout); each order
// still waits only until its own deadline; a batch of orders without
// deadlines has none either. An order whose deadline is closer than the
// write floor is answered at once and left out ([writeFloor]).
type batcher struct {
	in        chan *order
	maxBatch  int
	pool      func() *pgxpool.Pool
	floor     *writeFloor
	onWritten func(n int)
	wg        sync.WaitGroup
}

func newBatcher(queue, maxBatch int, pool func() *pgxpool.Pool, floor *writeFloor, onWritten func(int)) *batcher {
	return &batcher{in: make(chan *order, queue), maxBatch: maxBatch, pool: pool, floor: floor, onWritten: onWritten}
}

// start launches n writers that stop when ctx is done.
func (b *batcher) start(ctx context.Context, n int) {
	for range n {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.write(ctx)
		}()
	}
}

func (b *batcher) wait() { b.wg.Wait() }

// submit queues o and waits for its outcome or for o.ctx to end.
func (b *batcher) submit(o *order) error {
	select {
	case b.in <- o:
	case <-o.ctx.Done():
		return o.ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-o.ctx.Done():
		return o.ctx.Err()
	}
}

func (b *batcher) write(ctx context.Context) {
	batch := make([]*order, 0, b.maxBatch)
	ids := make([]string, 0, b.maxBatch)
	payloads := make([]string, 0, b.maxBatch)
	for {
		batch, ids, payloads = batch[:0], ids[:0], payloads[:0]
		select {
		case <-ctx.Done():
			return
		case o := <-b.in:
			batch = append(batch, o)
		}
	fill:
		for len(batch) < b.maxBatch {
			select {
			case o := <-b.in:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		var deadline time.Time
		live := batch[:0]
		for _, o := range batch {
			if o.ctx.Err() != nil {
				continue // its client has its answer already
			}
			if b.floor.tooLate(o.ctx) {
				o.done <- errTooLate // see writeFloor
				continue
			}
			if d, ok := o.ctx.Deadline(); ok && d.After(deadline) {
				deadline = d
			}
			live = append(live, o)
			ids = append(ids, o.id)
			payloads = append(payloads, o.payload)
		}
		if len(live) == 0 {
			continue
		}
		err := errNotStarted
		if pool := b.pool(); pool != nil {
			bctx, cancel := ctx, context.CancelFunc(func() {})
			if !deadline.IsZero() {
				bctx, cancel = context.WithDeadline(ctx, deadline)
			}
			start := time.Now()
			_, err = pool.Exec(bctx, insertBatch, ids, payloads)
			cancel()
			if err == nil {
				b.floor.observe(time.Since(start))
			}
		}
		if err == nil {
			b.onWritten(len(live))
		}
		for _, o := range live {
			o.done <- err
		}
	}
}
