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

// usageError is a command line the subcommand cannot run: wrong arguments
// or flags.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// noPortalError is a portal that nobody answers for on the admin socket.
type noPortalError struct{ err error }

func (e *noPortalError) Error() string { return e.err.Error() }
func (e *noPortalError) Unwrap() error { return e.err }

// refusedError is an action the command refuses on its own, such as USB
// on a desktop that cannot take it.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// refusef returns a refusedError with a formatted message.
func refusef(format string, args ...any) error {
	return &refusedError{fmt.Errorf(format, args...)}
}

// conflictError is a state that stops the command: nothing free, a name
// that means two things, a desktop someone else holds.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return e.err.Error() }
func (e *conflictError) Unwrap() error { return e.err }

// conflictf returns a conflictError with a formatted message.
func conflictf(format string, args ...any) error {
	return &conflictError{fmt.Errorf(format, args...)}
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
		ue *usageError
		np *noPortalError
		re *refusedError
		ce *conflictError
		ae *api.Error
	)
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &np):
		return ExitNoPortal
	case errors.As(err, &re):
		return ExitRefused
	case errors.As(err, &ce):
		return ExitConflict
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
