package store

import "context"

// protectKey marks a context whose audit rows are an admin's.
type protectKey struct{}

// Protect returns ctx marked as an admin's request: every audit row
// written for it is kept like ProtectedActions (never shed from a Buffer).
func Protect(ctx context.Context) context.Context {
	return context.WithValue(ctx, protectKey{}, true)
}

// protected reports whether ctx was marked by Protect.
func protected(ctx context.Context) bool {
	v, _ := ctx.Value(protectKey{}).(bool)
	return v
}
