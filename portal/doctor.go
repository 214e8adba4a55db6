package portal

import (
	"context"
	"errors"
)

// doctorFailed is a doctor run with a failing finding.
type doctorFailed struct{ n int }

func (e *doctorFailed) Error() string { return "doctor found failures" }

// runDoctor is `corral-vdi-portal doctor`.
func runDoctor(ctx context.Context, e cliEnv, args []string) error {
	return errors.New("doctor: not yet")
}
