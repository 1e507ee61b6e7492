package idempotent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb/sqldbtest"
	"github.com/paycallback/paycallback/pkg/idempotent"
)

// The three benchmarks run against the same table in one run, so their
// ops/s can be reported as ratios to BenchmarkRawInsertCommit, the ceiling of
// one durable single-row commit.

var benchSeq atomic.Int64

func BenchmarkAcquireMany(b *testing.B) {
	db := sqldbtest.MustMySQL(b)
	store := idempotent.NewStore(db)
	ctx := context.Background()
	run := benchSeq.Add(1)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := store.Acquire(ctx, claimFor(mustKey(b, fmt.Sprintf("BN%d-%d", run, i)), 1001))
		if err != nil || res.Kind != idempotent.Acquired {
			b.Fatalf("acquire: %v %v", res.Kind, err)
		}
	}
	reportOpsPerSec(b)
}

func BenchmarkAcquireDuplicate(b *testing.B) {
	db := sqldbtest.MustMySQL(b)
	store := idempotent.NewStore(db)
	ctx := context.Background()
	c := claimFor(mustKey(b, "BD"), 1001)
	_, err := store.Acquire(ctx, c)
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		res, err := store.Acquire(ctx, c)
		if err != nil || res.Kind != idempotent.Duplicate {
			b.Fatalf("acquire: %v %v", res.Kind, err)
		}
	}
	reportOpsPerSec(b)
}

func BenchmarkRawInsertCommit(b *testing.B) {
	db := sqldbtest.MustMySQL(b)
	ctx := context.Background()
	run := benchSeq.Add(1)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO ss_channel_idempotent
			(tenant_id, idempotent_key, event_type, status, fingerprint, created_at)
			VALUES (1001, ?, 'PAYMENT_RECEIVED', 'ACQUIRED', ?, ?)`,
			fmt.Sprintf("WECHAT:RAW%d-%d:PAYMENT_RECEIVED", run, i), fp, time.Now().UTC())
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	reportOpsPerSec(b)
}

func reportOpsPerSec(b *testing.B) {
	b.Helper()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
