package api

import (
	"os"
	"path/filepath"
)

// AdminSocketName is the admin socket's file name in the data directory,
// where serve listens and the CLI looks unless told otherwise.
const AdminSocketName = "admin.sock"

// PortalURLHeader carries the portal's web address on the admin socket's
// answers, for commands that print links.
const PortalURLHeader = "Corral-Portal-Url"

// rootDataDir is root's default data directory. Root's home is private
// (0700) and every sandboxed desktop's uid must pass through the data
// directory to its own folder, so root keeps its data where system
// services do. A data directory an older portal made in root's home is
// kept; local desktops then say how to move it.
const rootDataDir = "/var/lib/corral-vdi"

// DefaultDataDir returns the data directory serve uses when
// CORRAL_VDI_DATA_DIR is not set, and so where the CLI finds the admin
// socket: $XDG_DATA_HOME/corral-vdi, else ~/.local/share/corral-vdi
// (root: /var/lib/corral-vdi unless an older one is in its home).
func DefaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "corral-vdi")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "corral-vdi-data"
	}
	inHome := filepath.Join(home, ".local", "share", "corral-vdi")
	if os.Geteuid() == 0 {
		if _, err := os.Stat(inHome); err != nil {
			return rootDataDir
		}
	}
	return inHome
}
