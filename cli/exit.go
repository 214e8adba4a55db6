package cli

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// Exit codes of the admin subcommands, which scripts may rely on.
const (
	ExitOK       = 0 // done
	ExitFailed   = 1 // anything else, e.g. a doctor finding that fails
	ExitUsage    = 2 // bad arguments or flags
	ExitNotFound = 3 // no such pool or desktop
	ExitConflict = 4 // nothing free, held by someone, ambiguous name
	ExitNoPortal = 5 // the portal is not running (or its socket is elsewhere)
	ExitRefused  = 6 // not allowed: socket permissions, entitlement, unsupported
)

// exitError is a failure that ends the command with code rather than
// ExitFailed: a usage error, no portal, or a refusal or conflict the
// command finds on its own.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef returns a command line the subcommand cannot run, wrong
// arguments or flags (ExitUsage).
func usagef(format string, args ...any) error {
	return &exitError{ExitUsage, fmt.Errorf(format, args...)}
}

// refusef returns an action the command refuses on its own, such as USB
// on a desktop that cannot take it (ExitRefused).
func refusef(format string, args ...any) error {
	return &exitError{ExitRefused, fmt.Errorf(format, args...)}
}

// conflictf returns a state that stops the command: nothing free, a name
// that means two things, a desktop someone else holds (ExitConflict).
func conflictf(format string, args ...any) error {
	return &exitError{ExitConflict, fmt.Errorf(format, args...)}
}

// notFoundf returns an error that exits with ExitNotFound.
func notFoundf(format string, args ...any) error {
	return &api.Error{Status: http.StatusNotFound, Msg: fmt.Sprintf(format, args...)}
}

// ExitCode returns the exit code err should end the process with: 0 for
// nil, and one of the Exit* codes otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var (
		xe *exitError
		ae *api.Error
	)
	switch {
	case errors.As(err, &xe):
		return xe.code
	case errors.As(err, &ae):
		switch ae.Status {
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			return ExitUsage
		case http.StatusNotFound:
			return ExitNotFound
		case http.StatusConflict:
			return ExitConflict
		case http.StatusForbidden, http.StatusUnauthorized, http.StatusTooManyRequests:
			return ExitRefused
		}
	}
	return ExitFailed
}
