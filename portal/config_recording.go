package portal

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RecordingConfig bounds the recordings of recorded pools.
type RecordingConfig struct {
	// Retention is how long recordings are kept; negative: forever.
	Retention time.Duration
	// MaxBytes caps all recordings together; negative: no cap.
	MaxBytes int64
}

// recordingFlags registers the recording settings and returns what checks
// them after parsing.
func recordingFlags(fs *flag.FlagSet, c *Config, env func(name, def string) string) func() error {
	var age, size string
	fs.StringVar(&age, "recording-retention", env("CORRAL_VDI_RECORDING_RETENTION", "720h"), "keep session recordings this long, or off for forever (CORRAL_VDI_RECORDING_RETENTION)")
	fs.StringVar(&size, "recording-max-bytes", env("CORRAL_VDI_RECORDING_MAX_BYTES", "10GiB"), "total size of all session recordings, e.g. 500MiB or 20GiB, or off; a recorded session ends when it is reached (CORRAL_VDI_RECORDING_MAX_BYTES)")
	return func() error {
		var err error
		if age == "off" {
			c.Recording.Retention = -1
		} else if c.Recording.Retention, err = parseDuration(age); err != nil || c.Recording.Retention == 0 {
			return fmt.Errorf("CORRAL_VDI_RECORDING_RETENTION: %q is not a positive duration like 720h, nor off", age)
		}
		if c.Recording.MaxBytes, err = parseBytes(size); err != nil {
			return fmt.Errorf("CORRAL_VDI_RECORDING_MAX_BYTES: %w", err)
		}
		return nil
	}
}

// parseBytes reads a size: a number of bytes with an optional KiB, MiB or
// GiB (or K, M, G) suffix, or off (-1).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size like 500MiB, nor off", s)
	}
	return n * mult, nil
}
