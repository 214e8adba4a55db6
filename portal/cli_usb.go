package portal

import (
	"context"
	"errors"
)

// runUSB is `corral-vdi-portal usb list|redir`.
func runUSB(ctx context.Context, e cliEnv, args []string) error {
	return errors.New("usb: not yet")
}
