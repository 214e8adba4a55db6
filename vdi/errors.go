package vdi

import (
	"errors"
	"fmt"
)

// Sentinel errors of the Leases contract.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrConflict      = errors.New("conflict")
	// ErrNoneFree is the cause of a claim refused because every member of
	// the pool is held (as opposed to the user's own limits).
	ErrNoneFree = errors.New("no free member")
)

// Code classifies an Error; the HTTP layer maps each code to one status.
type Code string

// Error codes.
const (
	ENotFound    Code = "not_found"
	EConflict    Code = "conflict"
	EForbidden   Code = "forbidden"
	EInvalid     Code = "invalid"
	EUnavailable Code = "unavailable"
	EInternal    Code = "internal"
	// ETooLarge refuses a body over a limit (an upload larger than a file
	// may be); EFull one that does not fit where it goes (a quota, a full
	// disk).
	ETooLarge Code = "too_large"
	EFull     Code = "full"
	// EUnauthorized refuses a request whose sender is not (or no longer)
	// known: no identity, a sign-in that did not complete.
	EUnauthorized Code = "unauthorized"
	// EMisdirected refuses a request for a name the portal does not
	// answer to (an unknown Host).
	EMisdirected Code = "misdirected"
	// ETooMany refuses a request over a rate limit: wait, then try again.
	ETooMany Code = "too_many"
)

// Error is an error a user may see: Msg says what happened and Hint what to
// do next. Err is the cause, for logs only.
type Error struct {
	Code Code
	Msg  string
	Hint string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message and a hint.
func Errorf(code Code, hint, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// ErrorCode returns the code of the first *Error in err's chain, or EInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// failed reports whether err is the portal's own failure (internal, or a
// store that did not answer), not a claim's other ends: done (nil), a
// refusal its user is told (none free, a limit) or a forward to send
// elsewhere (ErrNotHolder).
func failed(err error) bool {
	if err == nil || errors.Is(err, ErrNotHolder) {
		return false
	}
	c := ErrorCode(err)
	return c == EInternal || c == EUnavailable
}
