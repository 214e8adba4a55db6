package portal

import (
	"testing"
	"time"
)

func TestRecordingConfig(t *testing.T) {
	for _, tc := range []struct {
		env       map[string]string
		retention time.Duration
		max       int64
		err       bool
	}{
		{map[string]string{}, 720 * time.Hour, 10 << 30, false},
		{map[string]string{"CORRAL_VDI_RECORDING_RETENTION": "off", "CORRAL_VDI_RECORDING_MAX_BYTES": "off"}, -1, -1, false},
		{map[string]string{"CORRAL_VDI_RECORDING_RETENTION": "48h", "CORRAL_VDI_RECORDING_MAX_BYTES": "500MiB"}, 48 * time.Hour, 500 << 20, false},
		{map[string]string{"CORRAL_VDI_RECORDING_MAX_BYTES": "4096"}, 720 * time.Hour, 4096, false},
		{map[string]string{"CORRAL_VDI_RECORDING_MAX_BYTES": "lots"}, 0, 0, true},
		{map[string]string{"CORRAL_VDI_RECORDING_MAX_BYTES": "0"}, 0, 0, true},
		{map[string]string{"CORRAL_VDI_RECORDING_RETENTION": "0"}, 0, 0, true},
	} {
		c, err := ParseConfig(nil, func(k string) string { return tc.env[k] })
		if tc.err {
			if err == nil {
				t.Errorf("ParseConfig(%v) = nil; want an error", tc.env)
			}
			continue
		}
		if err != nil || c.Recording.Retention != tc.retention || c.Recording.MaxBytes != tc.max {
			t.Errorf("ParseConfig(%v) = %+v, %v; want retention %v, max %d", tc.env, c.Recording, err, tc.retention, tc.max)
		}
	}
}
