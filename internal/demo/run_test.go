package demo_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/demo"
)

// TestRunRecoversBarcodePaymentsByQuery runs the whole demo, small: its
// invariants hold, and every barcode payment registered without a
// callback is recovered by the in-process querier against the fake
// WeChat: four of the six answered "not paid yet" first and asked again,
// each one's paid answer published once and settled from the query.
func TestRunRecoversBarcodePaymentsByQuery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	sum, err := demo.Run(ctx, demo.Options{Seed: 5, Trades: 40, Barcode: 6, Out: &out, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, out.String())
	assert.Empty(t, sum.Problems, out.String())
	assert.Equal(t, demo.BarcodeReport{Registered: 6, Recovered: 6, Queries: 10, NotYet: 4, Published: 6}, sum.Barcode, out.String())
	assert.Contains(t, out.String(), "recovered by query: 6 of 6 barcode payments registered without a callback (10 queries, 4 answered not yet paid)\n")
	assert.Equal(t, 6, sum.Outcomes["ignored"], "the six registrations claim nothing")
	assert.Equal(t, sum.Messages, sumOf(sum.Outcomes), "every message counted, the querier's answers too")
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
