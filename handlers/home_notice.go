package handlers

import (
	"errors"
	"net/url"
	"slices"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// The home page's notices after a form (post/redirect/get): the form
// redirects to /?notice=<kind>&about=<ns>/<name>, and the page says the
// notice's fixed words. The query never carries text: a link from another
// site can at most pick one of these, about a pool or desktop the page
// checks against what the user sees.

// Notice kinds.
const (
	noticeFull        = "full"        // every member of the pool is held
	noticeHeld        = "held"        // the user holds as many as they may
	noticeDenied      = "denied"      // the pool is not the user's to use
	noticeBusy        = "busy"        // a rate limit
	noticeUnavailable = "unavailable" // the backend could not start one
	noticeFailed      = "failed"      // anything else
	noticeReleased    = "released"    // a Release went through
)

// claimNotice is the notice kind for a claim's error.
func claimNotice(err error) string {
	var le *limitError
	switch {
	case errors.As(err, &le):
		return noticeBusy
	case errors.Is(err, vdi.ErrNoneFree):
		return noticeFull
	}
	switch vdi.ErrorCode(err) {
	case vdi.EConflict:
		return noticeHeld
	case vdi.EForbidden, vdi.ENotFound:
		return noticeDenied
	case vdi.EUnavailable:
		return noticeUnavailable
	}
	return noticeFailed
}

// noticeURL is the home page saying notice kind about ns/name.
func noticeURL(kind, ns, name string) string {
	return "/?notice=" + url.QueryEscape(kind) + "&about=" + url.QueryEscape(ns+"/"+name)
}

// homeNotice returns the notice q asks for, or nil when it names none or
// names a desktop they still hold. A refusal about a pool the user does
// not see (closed to them since they loaded the page) says so without
// naming it; other notices about such a pool are not shown.
func homeNotice(q url.Values, pools []views.PoolRow, mine []vdi.Desktop) *views.Notice {
	about := q.Get("about")
	seenPool := slices.ContainsFunc(pools, func(p views.PoolRow) bool { return p.Namespace+"/"+p.Name == about })
	held := slices.ContainsFunc(mine, func(d vdi.Desktop) bool { return d.Namespace+"/"+d.Name == about })
	n := &views.Notice{Kind: "error"}
	switch kind := q.Get("notice"); {
	case kind == noticeReleased && !held && about != "":
		n.Kind, n.Msg = "ok", "Released "+about+". Get a new desktop from a pool whenever you like."
	case kind == noticeHeld:
		n.Msg, n.Hint = "You hold as many desktops as you may.", "Release one below, then get a new one."
	case kind == noticeBusy:
		n.Msg, n.Hint = "Too many requests in a short time.", "Wait a moment, then try again."
	case kind == noticeDenied && !seenPool:
		// The pool is not named: a link could put any words there.
		n.Msg, n.Hint = "That pool is not open to you (any more): no desktop was claimed.", "Pick another pool, or ask an admin for access."
	case !seenPool:
		return nil
	case kind == noticeFull:
		n.Msg, n.Hint = "No desktop of pool "+about+" is free right now.", "Try again in a few minutes, or ask an admin to free one."
	case kind == noticeDenied:
		n.Msg, n.Hint = "Pool "+about+" is not yours to use.", "Ask an admin for access to it, or pick another pool."
	case kind == noticeUnavailable:
		n.Msg, n.Hint = "Pool "+about+" could not start a desktop right now.", "Try again in a minute; if it persists, tell an admin."
	case kind == noticeFailed:
		n.Msg, n.Hint = "Getting a desktop of pool "+about+" failed.", "Try again; if it persists, an admin can find the cause in the portal's log."
	default:
		return nil
	}
	return n
}
