package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseBytes reads a byte count: a plain number of bytes or a number with a
// unit (K, KB, KiB, M, MB, MiB, G, GB, GiB; the decimal and binary forms are
// both taken as powers of 1024, as memory sizes usually are).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
		"mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}[unit]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("bad size %q (want a number with an optional unit such as 512MiB or 4GB)", s)
	}
	return int64(v * mult), nil
}

// parseMB reads a size in megabytes: a plain number is megabytes, a number
// with a unit is converted (rounded up).
func parseMB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("bad size %q: negative", s)
		}
		return n, nil
	}
	b, err := parseBytes(t)
	if err != nil {
		return 0, err
	}
	return (b + 1<<20 - 1) >> 20, nil
}
