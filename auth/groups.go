package auth

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// GroupsFile is CORRAL_VDI_GROUPS_FILE: YAML mapping a group to the logins
// in it, for identities that carry no groups of their own (Tailscale
// headers, sign-in by name):
//
//	finance: [alice@example.com, bob@example.com]
//	admins: [carol@example.com]
//
// It is read again when it changes (looked at no more than every
// groupsRecheck); a file that does not parse keeps the last good one and
// logs why, once per change.
type GroupsFile struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time
	mtime   time.Time
	size    int64
	byLogin map[string][]string
	known   map[string]bool
}

var _ vdi.GroupDirectory = (*GroupsFile)(nil)

// groupsRecheck bounds how often the file's modification time is read.
const groupsRecheck = 2 * time.Second

// OpenGroupsFile reads path; unlike a later change, a first read that
// fails is an error, so a typo in the setting stops the portal at start.
func OpenGroupsFile(path string, log *slog.Logger) (*GroupsFile, error) {
	if log == nil {
		log = slog.Default()
	}
	g := &GroupsFile{path: path, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("CORRAL_VDI_GROUPS_FILE: %w", err)
	}
	if err := g.load(fi); err != nil {
		return nil, fmt.Errorf("CORRAL_VDI_GROUPS_FILE %s: %w", path, err)
	}
	return g, nil
}

// load parses the file; on error the groups stay as they were.
func (g *GroupsFile) load(fi os.FileInfo) error {
	g.mtime, g.size = fi.ModTime(), fi.Size()
	b, err := os.ReadFile(g.path)
	if err != nil {
		return err
	}
	var doc map[string][]string
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return fmt.Errorf("want YAML mapping each group to a list of logins, e.g. finance: [alice@example.com]: %w", err)
	}
	byLogin, known := map[string][]string{}, map[string]bool{}
	for group, logins := range doc {
		known[group] = true
		for _, l := range logins {
			l = strings.ToLower(strings.TrimSpace(l))
			if !slices.Contains(byLogin[l], group) {
				byLogin[l] = append(byLogin[l], group)
			}
		}
	}
	for _, gs := range byLogin {
		sort.Strings(gs)
	}
	g.byLogin, g.known = byLogin, known
	return nil
}

// refresh reads the file again when it changed; called with mu held.
func (g *GroupsFile) refresh() {
	now := time.Now()
	if now.Sub(g.checked) < groupsRecheck {
		return
	}
	g.checked = now
	fi, err := os.Stat(g.path)
	if err != nil {
		if !g.mtime.IsZero() {
			g.log.Error("groups file unreadable; keeping the groups last read", "file", g.path, "err", err)
			g.mtime = time.Time{}
		}
		return
	}
	if fi.ModTime().Equal(g.mtime) && fi.Size() == g.size {
		return
	}
	if err := g.load(fi); err != nil {
		g.log.Error("groups file did not parse; keeping the groups last read", "file", g.path, "err", err)
		return
	}
	g.log.Info("groups file read", "file", g.path, "groups", len(g.known))
}

// GroupsOf returns the groups the file lists login in.
func (g *GroupsFile) GroupsOf(login string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refresh()
	return slices.Clone(g.byLogin[strings.ToLower(login)])
}

// Known reports whether the file names group.
func (g *GroupsFile) Known(group string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refresh()
	return g.known[group]
}
