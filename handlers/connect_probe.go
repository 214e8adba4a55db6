package handlers

import (
	"context"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// pathProbeTimeout bounds finding the path of one console for an admin.
const pathProbeTimeout = 5 * time.Second

// annotatePaths fills in, for an admin's ?paths=1 (the CLI's connect), the
// path each console would take: it dials each as a watcher alongside the
// holder, so that a KubeVirt console with its one viewer is not taken from
// them, and closes the connection at once.
func (h *Handler) annotatePaths(ctx context.Context, ref vdi.Ref, opts []api.ConnectOption) {
	for i := range opts {
		dctx, cancel := context.WithTimeout(ctx, pathProbeTimeout)
		c, path, err := h.console.dial.DialAlongside(dctx, ref, opts[i].Protocol)
		cancel()
		if err != nil {
			opts[i].PathError = console.RootCause(err)
			continue
		}
		c.Close()
		opts[i].Path = path
	}
}
