package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// claimFormPattern is the "Get a desktop" form's route: it answers with a
// redirect whatever happens (post/redirect/get), rate limits included.
const claimFormPattern = "POST /pools/{ns}/{pool}/claim"

// routes registers every route of the portal.
func (h *Handler) routes() {
	m := h.mux
	m.Handle("GET /static/", h.assets.Handler())
	m.HandleFunc("GET /healthz", h.handleHealthz)
	m.HandleFunc("GET /readyz", h.handleReadyz)
	m.Handle("GET /metrics", h.metrics.handler(h.metricsToken, h.writeAPIError))
	m.HandleFunc("GET /favicon.ico", h.handleFavicon)
	m.HandleFunc("/", h.handleNotFound)

	m.HandleFunc("GET /signin", h.handleSignInPage)
	m.HandleFunc("POST /signin", h.handleSignIn)
	m.HandleFunc("POST /signout", h.handleSignOut)
	m.HandleFunc("GET /auth/oidc/login", h.handleOIDCLogin)
	m.HandleFunc("GET /auth/oidc/callback", h.handleOIDCCallback)

	m.HandleFunc("GET /{$}", h.page(h.handleHome))
	m.HandleFunc("GET /desktops/{ns}/{member}", h.page(h.handleConsolePage))
	m.HandleFunc("GET /history", h.page(h.handleMyHistory))
	m.HandleFunc("GET /history/recordings/{id}", h.page(h.handleRecordingPage))
	m.HandleFunc(claimFormPattern, h.page(h.handleClaimForm))
	m.HandleFunc("POST /desktops/{ns}/{member}/release", h.page(h.handleReleaseForm))

	m.HandleFunc("GET /kiosk/{pool}", h.page(h.handleKiosk))
	m.HandleFunc("POST /kiosk/{pool}", h.page(h.handleKioskClaim))
	m.HandleFunc("GET /admin", h.page(adminOnly(h.handleAdminPage)))
	m.HandleFunc("GET /admin/live", h.page(adminOnly(h.handleAdminLive)))
	m.HandleFunc("GET /admin/thumbs/{ns}/{member}", h.api(adminOnly(h.handleThumb)))
	m.HandleFunc("GET /admin/shadow/{ns}/{member}", h.page(adminOnly(h.handleShadowPage)))
	m.HandleFunc("POST /admin/end-sessions", h.page(adminOnly(h.handleEndSessionsForm)))
	m.HandleFunc("GET /admin/history", h.page(adminOnly(h.handleHistoryPage)))
	m.HandleFunc("GET /admin/history/sessions.csv", h.page(adminOnly(h.handleSessionsCSV)))
	m.HandleFunc("GET /admin/history/audit.csv", h.page(adminOnly(h.handleAuditCSV)))
	m.HandleFunc("GET /admin/recordings", h.page(adminOnly(h.handleRecordingsPage)))
	m.HandleFunc("GET /admin/recordings/{id}", h.page(adminOnly(h.handleRecordingPage)))
	m.HandleFunc("POST /admin/recordings/{id}/delete", h.page(adminOnly(h.handleRecordingDeleteForm)))

	m.HandleFunc("GET /api/vdi/pools", h.api(h.handlePoolsList))
	m.HandleFunc("POST /api/vdi/pools", h.api(adminOnly(h.handlePoolCreate)))
	m.HandleFunc("PATCH /api/vdi/pools/{ns}/{pool}", h.api(adminOnly(h.handlePoolUpdate)))
	m.HandleFunc("DELETE /api/vdi/pools/{ns}/{pool}", h.api(adminOnly(h.handlePoolDelete)))
	m.HandleFunc("POST /api/vdi/pools/{ns}/{pool}/claim", h.api(h.handlePoolClaim))
	m.HandleFunc("GET /api/vdi/desktops", h.api(h.handleDesktopsList))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}", h.api(h.handleDesktopGet))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/start", h.api(h.handleDesktopStart))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/stop", h.api(h.handleDesktopStop))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/release", h.api(h.handleDesktopRelease))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/assign", h.api(adminOnly(h.handleDesktopAssign)))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/recreate", h.api(adminOnly(h.handleDesktopRecreate)))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/connect", h.api(h.handleDesktopConnect))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/files", h.api(h.handleFilesList))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/files/{name}", h.api(h.handleFileDownload))
	m.HandleFunc("PUT /api/vdi/desktops/{ns}/{member}/files/{name}", h.api(h.handleFileUpload))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/viewers", h.api(h.handleDesktopViewers))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/link", h.api(h.handleDesktopLink))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/viewers/{id}/{answer}", h.api(h.handleViewerAnswer))
	m.HandleFunc("POST /api/vdi/users/{login}/end-sessions", h.api(adminOnly(h.handleEndSessionsAPI)))
	m.HandleFunc("GET /api/vdi/history/sessions", h.api(adminOnly(h.handleSessionsJSON)))
	m.HandleFunc("GET /api/vdi/history/audit", h.api(adminOnly(h.handleAuditJSON)))
	m.HandleFunc("GET /api/vdi/recordings", h.api(adminOnly(h.handleRecordingsJSON)))
	m.HandleFunc("GET /api/vdi/recordings/{id}", h.api(h.handleRecordingFile))
	m.HandleFunc("DELETE /api/vdi/recordings/{id}", h.api(adminOnly(h.handleRecordingDelete)))
	m.HandleFunc("/api/", h.api(h.handleAPINotFound))

	m.HandleFunc("GET /ws/vnc/{ns}/{member}", h.api(h.handleVNCSocket))
	m.HandleFunc("GET /ws/rdp/{ns}/{member}", h.api(h.handleRDPSocket))
	m.HandleFunc("GET /ws/serial/{ns}/{member}", h.api(h.handleSerialSocket))
	m.HandleFunc("GET /ws/terminal/{ns}/{member}", h.api(h.handleTerminalSocket))
	m.HandleFunc("GET /ws/audio/{ns}/{member}", h.api(h.handleAudioSocket))
	m.HandleFunc("GET /ws/usbredir/{ns}/{member}", h.usbAPI(h.handleUSBRedirSocket))
	m.HandleFunc("GET /peer/v1/{protocol}/{ns}/{member}", h.handlePeerSocket) // relay.PeerPath

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.refuse(w, r, "Cross-origin request refused", vdi.Errorf(vdi.EForbidden,
			"Use the portal's own pages; an operator who serves it at another origin adds it to CORRAL_VDI_PUBLIC_URL.",
			"The portal refused a change sent from another site (Sec-Fetch-Site: %s).", r.Header.Get("Sec-Fetch-Site")))
	}))
	h.protected = cop.Handler(m)
}
