package sqldbtest

import (
	"context"
	"sync/atomic"

	"github.com/uptrace/bun"
)

// StatementCounter is a bun query hook that counts the statements a
// bun.DB sends: db.WithQueryHook(counter). Safe for concurrent use.
type StatementCounter struct{ n atomic.Int64 }

// BeforeQuery counts one statement.
func (c *StatementCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	c.n.Add(1)
	return ctx
}

// AfterQuery does nothing.
func (*StatementCounter) AfterQuery(context.Context, *bun.QueryEvent) {}

// Count is how many statements were counted so far.
func (c *StatementCounter) Count() int64 { return c.n.Load() }
