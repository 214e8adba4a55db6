package handlers

// TokenKeyID returns the id of the key RDP tokens are signed with now, for
// comparing replicas: those that share CORRAL_VDI_TOKEN_KEYS report the
// same id. It reveals nothing about the key.
func (h *Handler) TokenKeyID() string { return h.console.tokens.KeyID() }
