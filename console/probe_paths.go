package console

import (
	"context"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// pathProbeTimeout bounds finding the path of one console for an admin.
const pathProbeTimeout = 5 * time.Second

// AnnotatePaths fills in, for an admin's ?paths=1 (the CLI's connect), the
// path each console would take: it dials each as a watcher alongside the
// holder, so that a KubeVirt console with its one viewer is not taken from
// them, and closes the connection at once.
func (c *Console) AnnotatePaths(ctx context.Context, ref vdi.Ref, opts []api.ConnectOption) {
	for i := range opts {
		dctx, cancel := context.WithTimeout(ctx, pathProbeTimeout)
		conn, path, err := c.DialAlongside(dctx, ref, opts[i].Protocol)
		cancel()
		if err != nil {
			opts[i].PathError = RootCause(err)
			continue
		}
		conn.Close()
		opts[i].Path = path
	}
}
