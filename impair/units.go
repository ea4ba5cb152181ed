package impair

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Units of ParseRate and ParseSize. Bits are written in any case ("mbit",
// "Mbit"); bytes with an upper-case B, so that "MB" is never taken for
// megabits. k, M and G are powers of 1000; Ki, Mi and Gi of 1024.
var (
	bitUnits = map[string]float64{
		"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
	}
	byteUnits = map[string]float64{
		"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	}
)

// splitNumber splits "2.5MB" into 2.5 and "MB".
func splitNumber(s string) (float64, string, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", fmt.Errorf("%q does not start with a number", s)
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, "", fmt.Errorf("%q: bad number %q", s, s[:i])
	}
	return v, strings.TrimSpace(s[i:]), nil
}

// ParseRate reads a rate as the --rate flag of the command takes it and
// returns it in bytes a second, rounded to the nearest byte: a number and
// a unit of bits ("20mbit", "512kbit", "1gbit", "100bit") or bytes
// ("2.5MB", "300kB", "1MiB", "800B") a second, optionally followed by
// "/s" ("20Mbit/s"). A bare number is refused, as ambiguous. The rate must
// be from 1 to MaxRate bytes a second.
func ParseRate(s string) (int64, error) {
	v, unit, err := splitNumber(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("rate %w", err)
	}
	unit = strings.TrimSuffix(unit, "/s")
	var bytes float64
	if m, ok := bitUnits[strings.ToLower(unit)]; ok {
		bytes = v * m / 8
	} else if m, ok := byteUnits[unit]; ok {
		bytes = v * m
	} else if unit == "" {
		return 0, fmt.Errorf("rate %q has no unit: write bits (20mbit) or bytes (2.5MB) a second", s)
	} else {
		return 0, fmt.Errorf("rate %q: unknown unit %q (want bit, kbit, mbit, gbit, B, kB, MB, GB, KiB, MiB or GiB)", s, unit)
	}
	r := math.Round(bytes)
	if r < 1 || r > MaxRate {
		return 0, fmt.Errorf("rate %q: want 8bit (1 byte) to %d bytes a second", s, int64(MaxRate))
	}
	return int64(r), nil
}

// ParseSize reads a size in bytes as the --queue flag of the command takes
// it: a number, alone for bytes or with a unit of bytes ("100kB", "64KiB",
// "1.5MB", "1500B"), rounded to the nearest byte.
func ParseSize(s string) (int64, error) {
	v, unit, err := splitNumber(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("size %w", err)
	}
	m := 1.0
	if unit != "" {
		var ok bool
		if m, ok = byteUnits[unit]; !ok {
			return 0, fmt.Errorf("size %q: unknown unit %q (want B, kB, MB, GB, KiB, MiB or GiB)", s, unit)
		}
	}
	r := math.Round(v * m)
	if r > math.MaxInt32 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(r), nil
}
