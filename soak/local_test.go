package soak

import "testing"

func localPhase(t *testing.T, sc scale, r *report) {}
