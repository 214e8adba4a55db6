package vdi

import (
	"fmt"
	"slices"
	"strings"
)

// Access says who may use a pool: the users named by login and the members
// of the groups named. An empty Access lets every signed-in user in.
// Admins always may.
type Access struct {
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Open reports whether the access lets every signed-in user in.
func (a Access) Open() bool { return len(a.Users) == 0 && len(a.Groups) == 0 }

// Allows reports whether id may see and claim from a pool with access a.
func (a Access) Allows(id Identity) bool {
	if id.Admin || a.Open() {
		return true
	}
	if slices.ContainsFunc(a.Users, func(u string) bool { return strings.EqualFold(u, id.Login) }) {
		return true
	}
	return slices.ContainsFunc(a.Groups, func(g string) bool { return slices.Contains(id.Groups, g) })
}

// String says who the access is for, for messages: "group finance and
// alice@example.com".
func (a Access) String() string {
	if a.Open() {
		return "everyone signed in"
	}
	var parts []string
	for _, g := range a.Groups {
		parts = append(parts, "group "+g)
	}
	parts = append(parts, a.Users...)
	return strings.Join(parts, ", ")
}

// Limits caps what one user may hold.
type Limits struct {
	// DesktopsPerUser is how many of the pool's desktops one user may
	// hold at once; 0 is no limit beyond the portal's own.
	DesktopsPerUser int `json:"desktopsPerUser,omitempty"`
}

// maxAccessEntries bounds an access list, which every claim reads.
const maxAccessEntries = 1000

// validAccess fails on group names that can never match anyone and on
// lists too long to check on every claim. Logins are checked where the
// portal's login rule lives (the HTTP layer, as sign-in checks them).
func validAccess(a Access) error {
	if len(a.Users)+len(a.Groups) > maxAccessEntries {
		return Errorf(EInvalid, "Use groups for long lists of users.", "Access lists at most %d users and groups.", maxAccessEntries)
	}
	for _, g := range a.Groups {
		if g == "" || len(g) > 256 || strings.ContainsAny(g, ",\n\r\t") {
			return Errorf(EInvalid, "Name groups as the identity provider or the groups file does.", "Access group %q is not a valid group name.", g)
		}
	}
	return nil
}

func validLimits(l Limits) error {
	if l.DesktopsPerUser < 0 || l.DesktopsPerUser > MaxPoolSize {
		return Errorf(EInvalid, fmt.Sprintf("Use 0 for no limit, or up to %d.", MaxPoolSize), "desktopsPerUser %d is out of range.", l.DesktopsPerUser)
	}
	return nil
}

// forbidden is the refusal a user not entitled to pool p gets.
func forbidden(p Pool) error {
	if p.Closed != "" {
		return Errorf(EForbidden, "Ask an admin to set the pool's access again (the dashboard says what is wrong), or pick another pool on the home page.",
			"Pool %s is for admins only until its definition is repaired.", p.Name)
	}
	return Errorf(EForbidden, "Ask an admin for access to it, or pick another pool on the home page.",
		"Pool %s is for %s.", p.Name, p.Access)
}

// For says who may use p, for messages: its access, or admins only while
// p is Closed.
func (p Pool) For() string {
	if p.Closed != "" {
		return "admins only (" + p.Closed + ")"
	}
	return p.Access.String()
}

// limitsDetail writes l for the audit log.
func limitsDetail(l Limits) string {
	if l.DesktopsPerUser == 0 {
		return "no per-user limit"
	}
	return fmt.Sprintf("%d per user", l.DesktopsPerUser)
}

// identityOf is login as the portal knows it without a sign-in: its groups
// from the groups file (Config.Groups). Groups an identity provider gives
// at sign-in are not known here.
func (s *Service) identityOf(login string) Identity {
	id := Identity{Login: login}
	if s.groups != nil {
		id.Groups = s.groups.GroupsOf(login)
	}
	return id
}

// accessWarnings returns the access's groups the groups file does not
// know, and whether only admins can get in (every group unknown, no user).
func (s *Service) accessWarnings(a Access) (unknown []string, adminsOnly bool) {
	if a.Open() {
		return nil, false
	}
	for _, g := range a.Groups {
		if s.groups == nil || !s.groups.Known(g) {
			unknown = append(unknown, g)
		}
	}
	return unknown, len(a.Users) == 0 && len(unknown) == len(a.Groups) && s.groups != nil
}

// GroupDirectory knows groups beyond what sign-in says: the groups file.
type GroupDirectory interface {
	// GroupsOf returns the groups login is in.
	GroupsOf(login string) []string
	// Known reports whether group is listed at all.
	Known(group string) bool
}
