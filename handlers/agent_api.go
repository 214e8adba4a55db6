package handlers

import (
	"io"
	"net/http"
	"strconv"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// maxAgentBody bounds the JSON arguments of an agent action (the longest
// is write_clipboard's text).
const maxAgentBody = 2 << 20

// handleAgentAction serves POST /api/vdi/desktops/{ns}/{member}/agent/{tool}:
// the agent seat's tools that act on a desktop, as plain JSON for scripts
// (the body is the tool's MCP arguments without "desktop"). As on /mcp,
// only a personal access token opens it, and each token's calls have the
// seat's rate limits in place of the per-user one. A screenshot answers
// its PNG (the screen's size in X-Screen-Width and X-Screen-Height);
// every other tool its answer as JSON.
func (h *mcpRoute) handleAgentAction(w http.ResponseWriter, r *http.Request) {
	id, ok := h.tokenOnly(w, r, "The agent API")
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAgentBody))
	if err != nil {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ETooLarge, "Send at most 2 MiB of arguments per call.", "The arguments are too large."))
		return
	}
	reply, err := h.seat.Act(r.Context(), id, ref(r), r.PathValue("tool"), body)
	if err != nil {
		h.writeAPIError(w, r, err)
		return
	}
	if reply.PNG != nil {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("X-Screen-Width", strconv.Itoa(reply.Screen.Width))
		w.Header().Set("X-Screen-Height", strconv.Itoa(reply.Screen.Height))
		w.Write(reply.PNG)
		return
	}
	writeJSON(w, http.StatusOK, reply.Value)
}
