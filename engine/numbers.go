package engine

import (
	"encoding/json"
	"math"
	"strconv"
)

// integerValue reads an integral number (3, 3.0 and 3e0 alike, as JSON Schema's
// "integer" does) that fits in an int.
func integerValue(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int(n), true
	case float64:
		return integralFloat(n)
	case json.Number:
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return int(i), true
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			return 0, false
		}
		return integralFloat(f)
	default:
		return 0, false
	}
}

func integralFloat(f float64) (int, bool) {
	// -2^63 is exact as a float64; 2^63 is the first value out of range.
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int(f), true
}

// numberValue reads a finite number; non-finite YAML values (.inf, .nan) are
// returned as they are for Validate to reject.
func numberValue(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := strconv.ParseFloat(n.String(), 64)
		return f, err == nil
	default:
		return 0, false
	}
}
