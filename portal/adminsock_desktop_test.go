package portal

import (
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// TestAdminSocket_RefusesDesktopUIDs opens the admin socket to everyone
// (as an operator might by mistake) and calls it as a desktop uid: the
// kernel's peer credentials name that uid, which is neither root nor the
// portal's, so the request never reaches the API.
func TestAdminSocket_RefusesDesktopUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to call as a desktop uid")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	dir, err := os.MkdirTemp("", "cas")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	reached := false
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true })
	a, err := openAdminSocket(filepath.Join(dir, api.AdminSocketName), h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go a.serve(t.Context())
	defer a.Close()
	os.Chmod(a.path, 0o666)
	out, _ := exec.Command("setpriv", "--reuid=200001", "--regid=200001", "--clear-groups",
		"curl", "-s", "--max-time", "5", "--unix-socket", a.path, "http://portal/api/vdi/desktops?all=1").CombinedOutput()
	if reached || !strings.Contains(string(out), "may not use the portal's admin socket") {
		t.Errorf("desktop uid on the admin socket: reached the API %v, answer %q; want refused", reached, out)
	}
}
