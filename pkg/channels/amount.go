package channels

import "errors"

var (
	errNotAmount   = errors.New("not a decimal amount")
	errAmountLarge = errors.New("exceeds the largest accepted amount")
)

// ParseYuan parses an Alipay yuan amount ("20", "88.8", "0.01") exactly
// into fen. It accepts only ASCII digits with at most two decimal places:
// no sign, exponent, spaces, separators, leading zeros ("01") or bare dot
// ("1.", ".5"). Values above MaxAmount fen are refused. The error is a
// *Error of KindInvalidAmount. No floating point is involved.
func ParseYuan(s string) (int64, error) {
	v, err := parseYuan(s)
	if err != nil {
		return 0, &Error{Kind: KindInvalidAmount, Err: errWithValue(s, err)}
	}
	return v, nil
}

// ParseFen parses a fen amount written as a decimal string (Shouqianba's
// "101") with the same strictness as ParseYuan, without decimal places.
// The error is a *Error of KindInvalidAmount.
func ParseFen(s string) (int64, error) {
	v, err := parseFen(s)
	if err != nil {
		return 0, &Error{Kind: KindInvalidAmount, Err: errWithValue(s, err)}
	}
	return v, nil
}

func errWithValue(s string, err error) error {
	return &valueError{value: s, err: err}
}

type valueError struct {
	value string
	err   error
}

func (e *valueError) Error() string { return "amount " + quote(e.value) + ": " + e.err.Error() }
func (e *valueError) Unwrap() error { return e.err }

func parseYuan(s string) (int64, error) {
	intPart, frac, hasDot := cut(s, '.')
	yuan, err := parseFen(intPart)
	if err != nil {
		return 0, err
	}
	if yuan > MaxAmount/100 {
		return 0, errAmountLarge
	}
	fen := yuan * 100
	if hasDot {
		switch len(frac) {
		case 1:
			if !isDigit(frac[0]) {
				return 0, errNotAmount
			}
			fen += int64(frac[0]-'0') * 10
		case 2:
			if !isDigit(frac[0]) || !isDigit(frac[1]) {
				return 0, errNotAmount
			}
			fen += int64(frac[0]-'0')*10 + int64(frac[1]-'0')
		default:
			return 0, errNotAmount
		}
	}
	if fen > MaxAmount {
		return 0, errAmountLarge
	}
	return fen, nil
}

// parseFen parses a non-negative integer without sign or leading zeros, at
// most MaxAmount.
func parseFen(s string) (int64, error) { return parseUint(s, MaxAmount) }

// parseUint parses a non-negative decimal integer without sign or leading
// zeros, at most limit (which must be below 10^18).
func parseUint(s string, limit int64) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, errNotAmount
	}
	var v int64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, errNotAmount
		}
		v = v*10 + int64(s[i]-'0')
		if v > limit {
			return 0, errAmountLarge
		}
	}
	return v, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
