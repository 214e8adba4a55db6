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
	// UserMaxBytes is each user's share of MaxBytes; zero: a quarter of
	// it, negative: none.
	UserMaxBytes int64
	// DiskReserve is the free space recordings leave on the disks of the
	// recordings and the database; zero: 5% of each disk (64 MiB to 2 GiB).
	DiskReserve int64
}

// recordingFlags registers the recording settings and returns what checks
// them after parsing.
func recordingFlags(fs *flag.FlagSet, c *Config, env func(name, def string) string) func() error {
	var age, size, share, reserve string
	fs.StringVar(&age, "recording-retention", env("CORRAL_VDI_RECORDING_RETENTION", "720h"), "keep session recordings this long, or off for forever (CORRAL_VDI_RECORDING_RETENTION)")
	fs.StringVar(&size, "recording-max-bytes", env("CORRAL_VDI_RECORDING_MAX_BYTES", "10GiB"), "total size of all session recordings, e.g. 500MiB or 20GiB, or off; a recorded session ends when it is reached (CORRAL_VDI_RECORDING_MAX_BYTES)")
	fs.StringVar(&share, "recording-max-bytes-per-user", env("CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER", "auto"), "one user's share of the recordings' total, e.g. 2GiB, auto (a quarter of it) or off; beyond it only that user's recorded consoles are refused (CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER)")
	fs.StringVar(&reserve, "recording-disk-reserve", env("CORRAL_VDI_RECORDING_DISK_RESERVE", "auto"), "free space recordings leave on the disks of the recordings and the database, e.g. 1GiB, or auto (5% of each disk, 64MiB to 2GiB) (CORRAL_VDI_RECORDING_DISK_RESERVE)")
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
		if c.Recording.UserMaxBytes, err = parseAutoBytes(share); err != nil {
			return fmt.Errorf("CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER: %w", err)
		}
		if reserve == "off" {
			return fmt.Errorf("CORRAL_VDI_RECORDING_DISK_RESERVE: %q: the database's disk always keeps a reserve; give a size like 1GiB, or auto", reserve)
		}
		if c.Recording.DiskReserve, err = parseAutoBytes(reserve); err != nil {
			return fmt.Errorf("CORRAL_VDI_RECORDING_DISK_RESERVE: %w", err)
		}
		return nil
	}
}

// parseAutoBytes is parseBytes that reads auto as 0 (the default).
func parseAutoBytes(s string) (int64, error) {
	if strings.TrimSpace(s) == "auto" {
		return 0, nil
	}
	return parseBytes(s)
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
