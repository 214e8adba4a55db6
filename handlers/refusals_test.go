package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestRefusals_PeerAndUSBToken: the peer link and the USB token refuse
// through the one error mapper: the status of the vdi code, a JSON body
// with a message and a hint, never a console.
func TestRefusals_PeerAndUSBToken(t *testing.T) {
	e := mustTestEnv(t, testEnvConfig{})
	secret := []byte("a-peer-secret-of-thirty-two-byte")
	h := New(Config{Auth: e.auth, Assets: e.assets, Log: e.log, PublicURLs: []string{"http://example.com"}, Console: ConsoleConfig{PeerSecret: secret}})
	for _, tc := range []struct {
		name, path string
		header     map[string]string
		code       int
		msg        string
	}{
		{"peer link unsigned", "/peer/v1/vnc/local/m1", nil, http.StatusUnauthorized, "Peer signature missing or not valid."},
		{"peer link by a signed-in user", "/peer/v1/vnc/local/m1", map[string]string{"Tailscale-User-Login": "alice"},
			http.StatusForbidden, "Peer links are for peer portals, not users."},
		{"peer link for rdp", "/peer/v1/rdp/local/m1",
			map[string]string{relay.PeerAuthHeader: relay.SignPeer(secret, time.Now(), "example.com", "rdp", "local", "m1")},
			http.StatusNotFound, "No peer link for protocol rdp."},
		{"usb token forged", "/ws/usbredir/local/m1", map[string]string{"Authorization": "Bearer forged"},
			http.StatusUnauthorized, "The USB token is not valid for this desktop, or has expired."},
		{"usb token of another desktop", "/ws/usbredir/local/m1", map[string]string{"Authorization": "Bearer " + USBToken("alice", vdi.Ref{Namespace: "local", Name: "m2"})},
			http.StatusUnauthorized, "The USB token is not valid for this desktop, or has expired."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tc.path, nil)
			req.RemoteAddr = "127.0.0.1:40000"
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			var got api.Error
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != tc.code || got.Msg != tc.msg || got.Hint == "" ||
				!strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				t.Errorf("GET %s = %d %s %q (%v); want %d with %q and a hint", tc.path, w.Code, w.Header().Get("Content-Type"), w.Body, err, tc.code, tc.msg)
			}
		})
	}
}
