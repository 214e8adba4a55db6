package api

import (
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Assign is the body of POST /api/vdi/desktops/{ns}/{member}/assign.
type Assign struct {
	User string `json:"user"`
}

// Release is the optional body of POST
// /api/vdi/desktops/{ns}/{member}/release; admins give a reason for a
// force-release, which the audit log and the user's console show.
type Release struct {
	Reason string `json:"reason"`
}

// Oversight is the optional body of POST
// /api/vdi/desktops/{ns}/{member}/oversight/stop: RevokeToken revokes,
// with the stop, the token the agent at work in the desktop uses (the
// one its claim names; a request never names a token).
type Oversight struct {
	RevokeToken bool `json:"revokeToken,omitempty"`
}

// Connect answers GET /api/vdi/desktops/{ns}/{member}/connect: the best
// console and the others. On a recorded desktop Recorded is set and Notice
// says so (and why RDP is not among the options).
type Connect struct {
	ConnectOption
	Fallbacks []ConnectOption `json:"fallbacks"`
	// Console is what the pool's policy allows every console of the
	// desktop (clipboard, file transfer), for the page to follow.
	Console  vdi.ConsolePolicy `json:"console"`
	Recorded bool              `json:"recorded,omitempty"`
	Notice   string            `json:"notice,omitempty"`
	// Asks names the holder whose consent the caller's console waits for
	// (the pool's watch policy is consent and the caller is not the
	// holder), so that the page says whom it waits for.
	Asks string `json:"asks,omitempty"`
}

// ConnectOption is one way to open a desktop's console. RDP options also
// carry what IronRDP needs: the gateway token, the destination, and the
// sign-in when the portal knows it (shown to the holder only); a serial
// console carries the guest's login the same way.
type ConnectOption struct {
	Protocol    vdi.Protocol `json:"protocol"`
	WebSocket   string       `json:"websocket"`
	Token       string       `json:"token,omitempty"`
	Destination string       `json:"destination,omitempty"`
	Credentials *Credentials `json:"credentials,omitempty"`
	// Caps says what this console can do (the panel offers a better one
	// where it lacks a clipboard).
	Caps *vdi.Caps `json:"caps,omitempty"`
	// WebRTC says that a VNC console's video may come on a WebRTC track
	// (the portal's CORRAL_VDI_WEBRTC_UDP is set): the page's Picture
	// menu then offers it, and Auto takes it on a WAN's round trip.
	WebRTC bool `json:"webrtc,omitempty"`
	// Path and PathError say, for an admin's ?paths=1, how the console
	// would be reached (direct, peer, apiserver) or why not.
	Path      string `json:"path,omitempty"`
	PathError string `json:"pathError,omitempty"`
}

// Credentials is a desktop's console sign-in, shown only to its holder.
type Credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Viewer is one console of a desktop opened by someone other than its
// holder, as GET /api/vdi/desktops/{ns}/{member}/viewers lists them.
type Viewer struct {
	ID   string `json:"id"`
	User string `json:"user"`
	// Role is "watch" (view only: the relay drops their input),
	// "control" (their keys reach the desktop), "listen" (the desktop's
	// sound, Protocol "audio") or "asks" (waiting for the holder's consent
	// to Wants, "watch", "control", or "request-control": an admin
	// watching who asks for control of the screen), or "agent" (an agent
	// with the holder's token, User its name "bot:alice/test-runner").
	Role  string `json:"role"`
	Wants string `json:"wants,omitempty"`
	// Granted marks an admin's console with the control the holder gave
	// (Request control), which the holder may take back (answer "end").
	Granted  bool         `json:"granted,omitempty"`
	Protocol vdi.Protocol `json:"protocol"`
	Since    time.Time    `json:"since"`
	// AgentControl and AgentStopped, on an agent's entry, name who took
	// control from it and who stopped it (the desktop's claim).
	AgentControl string `json:"agentControl,omitempty"`
	AgentStopped string `json:"agentStopped,omitempty"`
	// AgentRevoked says that the agent stopped had its token revoked at
	// the Stop: it cannot go on; others are let in (go-on).
	AgentRevoked bool `json:"agentRevoked,omitempty"`
}

// ControlGrant answers an admin's POST …/control that the holder allowed:
// Grant, given as ?control= to the screen's console websocket, opens it
// with control (for a short while, on any replica).
type ControlGrant struct {
	Grant  string `json:"grant"`
	Holder string `json:"holder"`
}
