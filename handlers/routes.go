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
	m.HandleFunc("GET /healthz", h.probes.handleHealthz)
	m.HandleFunc("GET /readyz", h.probes.handleReadyz)
	m.Handle("GET /metrics", h.metrics.handler(h.metricsTok, h.metricsOff, h.writeAPIError))
	m.HandleFunc("GET /favicon.ico", h.fallback.handleFavicon)
	m.HandleFunc("/", h.fallback.handleNotFound)

	m.HandleFunc("GET /signin", h.signIn.handleSignInPage)
	m.HandleFunc("POST /signin", h.signIn.handleSignIn)
	m.HandleFunc("POST /signout", h.signIn.handleSignOut)
	m.HandleFunc("GET /auth/oidc/login", h.signIn.handleOIDCLogin)
	m.HandleFunc("GET /auth/oidc/callback", h.signIn.handleOIDCCallback)

	m.HandleFunc("GET /{$}", h.page(h.mine.handleHome))
	m.HandleFunc("GET /desktops/{ns}/{member}", h.page(h.handleConsolePage))
	m.HandleFunc("GET /history", h.page(h.history.handleMyHistory))
	m.HandleFunc("GET /shared/{ns}/{member}", h.page(h.shares.handleSharedPage))
	m.HandleFunc("GET /history/recordings/{id}", h.page(h.recorded.handleRecordingPage))
	m.HandleFunc(claimFormPattern, h.page(h.mine.handleClaimForm))
	m.HandleFunc("POST /desktops/{ns}/{member}/release", h.page(h.mine.handleReleaseForm))
	m.HandleFunc("POST /desktops/{ns}/{member}/start", h.page(h.mine.handleStartForm))

	m.HandleFunc("GET /tokens", h.page(h.tokens.handleTokensPage))
	m.HandleFunc("POST /tokens", h.page(h.tokens.handleTokenForm))
	m.HandleFunc("POST /tokens/{id}/revoke", h.page(h.tokens.handleTokenRevokeForm))
	m.HandleFunc("GET /kiosk/{pool}", h.page(h.kiosk.handleKiosk))
	m.HandleFunc("POST /kiosk/{pool}", h.page(h.kiosk.handleKioskClaim))
	m.HandleFunc("GET /admin", h.page(adminOnly(h.admin.handleAdminPage)))
	m.HandleFunc("GET /admin/live", h.page(adminOnly(h.admin.handleAdminLive)))
	m.HandleFunc("GET /admin/thumbs/{ns}/{member}", h.api(adminOnly(h.admin.handleThumb)))
	m.HandleFunc("GET /admin/shadow/{ns}/{member}", h.page(adminOnly(h.admin.handleShadowPage)))
	m.HandleFunc("POST /admin/end-sessions", h.page(adminOnly(h.admin.handleEndSessionsForm)))
	m.HandleFunc("GET /admin/history", h.page(adminOnly(h.history.handleHistoryPage)))
	m.HandleFunc("GET /admin/history/sessions.csv", h.page(adminOnly(h.history.handleSessionsCSV)))
	m.HandleFunc("GET /admin/history/audit.csv", h.page(adminOnly(h.history.handleAuditCSV)))
	m.HandleFunc("GET /admin/usage", h.page(adminOnly(h.usage.handleUsagePage)))
	m.HandleFunc("GET /admin/recordings", h.page(adminOnly(h.recorded.handleRecordingsPage)))
	m.HandleFunc("GET /admin/recordings/{id}", h.page(adminOnly(h.recorded.handleRecordingPage)))
	m.HandleFunc("POST /admin/recordings/{id}/delete", h.page(adminOnly(h.recorded.handleRecordingDeleteForm)))

	m.HandleFunc("GET /api/vdi/pools", h.api(h.mine.handlePoolsList))
	m.HandleFunc("POST /api/vdi/pools", h.api(adminOnly(h.pools.handlePoolCreate)))
	m.HandleFunc("PATCH /api/vdi/pools/{ns}/{pool}", h.api(adminOnly(h.pools.handlePoolUpdate)))
	m.HandleFunc("DELETE /api/vdi/pools/{ns}/{pool}", h.api(adminOnly(h.pools.handlePoolDelete)))
	m.HandleFunc("GET /api/vdi/pools/{ns}/{pool}/job", h.api(adminOnly(h.pools.handlePoolJob)))
	m.HandleFunc("POST /api/vdi/pools/{ns}/{pool}/job/cancel", h.api(adminOnly(h.pools.handlePoolJobCancel)))
	m.HandleFunc("GET /api/vdi/jobs", h.api(adminOnly(h.pools.handleJobsList)))
	m.HandleFunc("POST /api/vdi/pools/{ns}/{pool}/claim", h.api(h.mine.handlePoolClaim))
	m.HandleFunc("GET /api/vdi/desktops", h.api(h.mine.handleDesktopsList))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}", h.api(h.mine.handleDesktopGet))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/start", h.api(h.mine.handleDesktopStart))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/start-fresh", h.api(h.mine.handleDesktopStartFresh))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/stop", h.api(h.mine.handleDesktopStop))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/release", h.api(h.mine.handleDesktopRelease))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/assign", h.api(adminOnly(h.admin.handleDesktopAssign)))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/recreate", h.api(adminOnly(h.admin.handleDesktopRecreate)))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/connect", h.api(h.handleDesktopConnect))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/files", h.api(h.files.handleFilesList))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/files/{name}", h.api(h.files.handleFileDownload))
	m.HandleFunc("PUT /api/vdi/desktops/{ns}/{member}/files/{name}", h.api(h.files.handleFileUpload))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/clipboard/image", h.api(h.clipImages.handleClipImageGet))
	m.HandleFunc("PUT /api/vdi/desktops/{ns}/{member}/clipboard/image", h.api(h.clipImages.handleClipImagePut))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/viewers", h.api(h.handleDesktopViewers))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/shares", h.api(h.shares.handleShareCreate))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/shares", h.api(h.shares.handleSharesList))
	m.HandleFunc("DELETE /api/vdi/desktops/{ns}/{member}/shares/{id}", h.api(h.shares.handleShareDelete))
	m.HandleFunc("PATCH /api/vdi/desktops/{ns}/{member}/shares/{id}", h.api(h.shares.handleShareControl))
	m.HandleFunc("GET /api/vdi/desktops/{ns}/{member}/link", h.api(h.mine.handleDesktopLink))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/viewers/{id}/{answer}", h.api(h.handleViewerAnswer))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/control", h.api(h.handleControlRequest))
	m.HandleFunc("POST /api/vdi/users/{login}/end-sessions", h.api(adminOnly(h.admin.handleEndSessionsAPI)))
	m.HandleFunc("GET /api/vdi/history/sessions", h.api(adminOnly(h.history.handleSessionsJSON)))
	m.HandleFunc("GET /api/vdi/history/audit", h.api(adminOnly(h.history.handleAuditJSON)))
	m.HandleFunc("GET /api/vdi/usage", h.api(adminOnly(h.usage.handleUsageJSON)))
	m.HandleFunc("GET /api/vdi/recordings", h.api(adminOnly(h.recorded.handleRecordingsJSON)))
	m.HandleFunc("GET /api/vdi/recordings/{id}", h.api(h.recorded.handleRecordingFile))
	m.HandleFunc("DELETE /api/vdi/recordings/{id}", h.api(adminOnly(h.recorded.handleRecordingDelete)))
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/agent/{tool}", h.mcp.handleAgentAction)
	m.HandleFunc("POST /api/vdi/desktops/{ns}/{member}/oversight/{action}", h.api(h.mcp.handleAgentOversight))
	m.HandleFunc("POST /api/vdi/tokens", h.api(h.tokens.handleTokenCreate))
	m.HandleFunc("GET /api/vdi/tokens", h.api(h.tokens.handleTokensList))
	m.HandleFunc("DELETE /api/vdi/tokens/{id}", h.api(h.tokens.handleTokenDelete))
	m.HandleFunc("PUT /api/vdi/settings/size", h.api(h.settings.handleSet(sizeSetting)))
	m.HandleFunc("PUT /api/vdi/settings/keyboard", h.api(h.settings.handleSet(layoutSetting)))
	m.HandleFunc("/api/", h.api(handleAPINotFound))
	m.HandleFunc("/mcp", h.mcp.handleMCP)

	m.HandleFunc("GET /ws/vnc/{ns}/{member}", h.api(h.handleVNCSocket))
	m.HandleFunc("GET /ws/rdp/{ns}/{member}", h.api(h.handleRDPSocket))
	m.HandleFunc("GET /ws/serial/{ns}/{member}", h.api(h.handleSerialSocket))
	m.HandleFunc("GET /ws/terminal/{ns}/{member}", h.api(h.handleTerminalSocket))
	m.HandleFunc("GET /ws/audio/{ns}/{member}", h.api(h.audio.handleAudioSocket))
	m.HandleFunc("GET /ws/usbredir/{ns}/{member}", h.usb.usbAPI(h.usb.handleUSBRedirSocket))
	m.HandleFunc("GET /peer/v1/{protocol}/{ns}/{member}", h.peer.handlePeerSocket) // relay.PeerPath
	m.HandleFunc("GET /peer/v1/screen/{role}/{ns}/{member}", h.peer.handlePeerScreen)
	m.HandleFunc("GET /peer/v1/video/{nonce}/{ns}/{member}", h.peer.handlePeerVideo)
	m.HandleFunc("GET /peer/v1/stream/{protocol}/{role}/{ns}/{member}", h.peer.handlePeerStream)
	m.HandleFunc("GET /peer/v1/held/{protocol}/{version}/{ns}/{member}", h.peer.handlePeerHeld)
	m.HandleFunc("POST /peer/v1/take", h.peer.handlePeerTake)
	m.HandleFunc("GET /peer/v1/viewers/{ns}/{member}", h.peer.handlePeerViewers)
	m.HandleFunc("POST /peer/v1/viewers/{ns}/{member}/{id}/{answer}", h.peer.handlePeerViewerAnswer)

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hosts.refuse(w, r, "Cross-origin request refused", vdi.Errorf(vdi.EForbidden,
			"Use the portal's own pages; an operator who serves it at another origin adds it to CORRAL_VDI_PUBLIC_URL.",
			"The portal refused a change sent from another site (Sec-Fetch-Site: %s).", r.Header.Get("Sec-Fetch-Site")))
	}))
	h.protected = cop.Handler(m)
}
