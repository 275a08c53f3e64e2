package offload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the units ParseBytes accepts, by lower-cased spelling:
// binary (KiB, MiB, …) and decimal (KB, MB, …), with or without the B.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1000, "kb": 1000, "kib": 1 << 10, "ki": 1 << 10,
	"m": 1000 * 1000, "mb": 1000 * 1000, "mib": 1 << 20, "mi": 1 << 20,
	"g": 1000 * 1000 * 1000, "gb": 1000 * 1000 * 1000, "gib": 1 << 30, "gi": 1 << 30,
	"t": 1000 * 1000 * 1000 * 1000, "tb": 1000 * 1000 * 1000 * 1000, "tib": 1 << 40, "ti": 1 << 40,
}

// ParseBytes reads a byte count: "1073741824", "512MiB", "1.5 GiB", "800MB".
// Units are case-insensitive; KiB/MiB/GiB/TiB are powers of 1024 and
// KB/MB/GB/TB powers of 1000. An unknown unit is an error naming it.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		return 0, fmt.Errorf("offload: byte size %q: want a number with an optional unit, e.g. 512MiB or 2GB", s)
	}
	mul, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("offload: byte size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mul {
			return 0, fmt.Errorf("offload: byte size %q is out of range", s)
		}
		return n * mul, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("offload: byte size %q: %q is not a number", s, num)
	}
	v := f * float64(mul)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("offload: byte size %q is out of range", s)
	}
	return int64(v), nil
}

// FormatBytes renders n in binary units with one decimal ("1.5 GiB").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	d, e := float64(n), 0
	for d >= unit && e < 4 {
		d /= unit
		e++
	}
	return fmt.Sprintf("%.1f %ciB", d, "KMGT"[e-1])
}
