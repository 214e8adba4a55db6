package soak

import "testing"

func fuzzPhase(t *testing.T, sc scale, r *report) {}
