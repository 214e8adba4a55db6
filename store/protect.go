package store

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// protected reports whether ctx was marked by vdi.Protect.
func protected(ctx context.Context) bool { return vdi.Protected(ctx) }
