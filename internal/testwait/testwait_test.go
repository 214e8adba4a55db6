package testwait

import (
	"testing"
	"time"
)

func TestScale(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want float64
	}{{"", 1}, {"2", 2}, {"1.5", 1.5}, {"0.5", 1}, {"-3", 1}, {"two", 1}, {"NaN", 1}, {"Inf", 1}} {
		t.Setenv(EnvScale, tc.env)
		if got := Scale(); got != tc.want {
			t.Errorf("%s=%q: Scale() = %v; want %v", EnvScale, tc.env, got, tc.want)
		}
	}
	t.Setenv(EnvScale, "2")
	if got := D(15 * time.Second); got != 30*time.Second {
		t.Errorf("D(15s) at 2 = %v; want 30s", got)
	}
	if got := MS(15000); got != 30000 {
		t.Errorf("MS(15000) at 2 = %v; want 30000", got)
	}
}
