package channels_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
)

func TestParseYuan(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"20", 2000, true},
		{"88.8", 8880, true},
		{"0.01", 1, true},
		{"0.00", 0, true},
		{"0", 0, true},
		{"25.80", 2580, true},
		{"10000000000", 1_000_000_000_000, true}, // ten billion yuan: the cap
		{"9999999999.99", 999_999_999_999, true},
		{"1.005", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1,00", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"01", 0, false},
		{"00.01", 0, false},
		{"1.2.3", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"0x10", 0, false},
		{"１", 0, false}, // full-width digit
		{"10000000000.01", 0, false},
		{"99999999999", 0, false},
		{"9223372036854775807", 0, false},
		{"92233720368547758070000", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := channels.ParseYuan(tt.in)
			if !tt.ok {
				kind, typed := channels.KindOf(err)
				require.True(t, typed, "err %v", err)
				require.Equal(t, channels.KindInvalidAmount, kind)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseFen(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"101", 101, true},
		{"0", 0, true},
		{"1000000000000", 1_000_000_000_000, true},
		{"1000000000001", 0, false},
		{"1.00", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"007", 0, false},
		{"1e3", 0, false},
		{"12 ", 0, false},
		{"99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := channels.ParseFen(tt.in)
			if !tt.ok {
				kind, _ := channels.KindOf(err)
				require.Equal(t, channels.KindInvalidAmount, kind, "err %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
