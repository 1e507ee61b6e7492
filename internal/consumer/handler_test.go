package consumer

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/metrics"
	"github.com/paycallback/paycallback/internal/pipeline"
	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/channelstest"
	"github.com/paycallback/paycallback/pkg/idempotent"
	"github.com/paycallback/paycallback/pkg/settled"
	"github.com/paycallback/paycallback/pkg/settlement"
)

// acceptedDeadLetters takes every dead letter, as a topic would.
type acceptedDeadLetters struct{}

func (acceptedDeadLetters) DeadLetter(context.Context, kafka.Message, channels.ErrorKind, string) error {
	return nil
}

// pipelineEnv is a pipeline on its own MariaDB database, for the tests
// that run a worker in front of it.
type pipelineEnv struct {
	db  *bun.DB
	svc *settlement.Service
	reg *prometheus.Registry
	p   *pipeline.Pipeline
}

func newPipelineEnv(tb testing.TB) *pipelineEnv {
	tb.Helper()
	return newPipelineEnvOn(tb, sqldbtest.MustMySQL(tb))
}

// newPipelineEnvOn is newPipelineEnv on the migrated database db.
func newPipelineEnvOn(tb testing.TB, db *bun.DB) *pipelineEnv {
	tb.Helper()
	claims := idempotent.NewStore(db)
	reg := prometheus.NewRegistry()
	svc, err := settlement.New(db, claims, slog.New(slog.DiscardHandler), reg)
	require.NoError(tb, err)
	met, err := metrics.New(reg)
	require.NoError(tb, err)
	return &pipelineEnv{db: db, svc: svc, reg: reg, p: &pipeline.Pipeline{
		Decoder: channels.NewDecoder(channelstest.Keys()), Claims: claims, Settler: svc,
		DeadLetterer: acceptedDeadLetters{}, Metrics: met, Logger: slog.New(slog.DiscardHandler),
	}}
}

// mergeCounter counts the merged transactions of a Settler.
type mergeCounter struct {
	pipeline.Settler
	n atomic.Int64
}

func (c *mergeCounter) SettleMergedFrom(ctx context.Context, evs []channels.Event, sources []settled.Source) ([]settlement.Result, error) {
	c.n.Add(1)
	return c.Settler.SettleMergedFrom(ctx, evs, sources)
}
