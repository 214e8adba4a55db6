package cli

import (
	"flag"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// policyFlagSet holds the flags that set a pool's reclaim and console
// policy; a flag not given leaves its field as it was.
type policyFlagSet struct {
	fs                                 *Flags
	grace, maxSession, idle            string
	clipboard, network, watch, files   string
	audio, record, recordInput, ownRec bool
}

// policyFlags adds the policy flags to f.
func policyFlags(f *Flags) *policyFlagSet {
	p := &policyFlagSet{fs: f}
	f.StringVar(&p.grace, "disconnect-grace", "", "reclaim this long after the last console closes, e.g. 15m; default the portal's")
	f.StringVar(&p.maxSession, "max-session", "", "longest claim, e.g. 8h; default off")
	f.StringVar(&p.idle, "idle-timeout", "", "reclaim after no input this long, e.g. 1h; default off")
	f.StringVar(&p.clipboard, "clipboard", "", "which way console clipboards carry text: both, to-desktop, from-desktop or off; default both")
	f.StringVar(&p.files, "files", "", "which way files move (the Files panel; RDP's file streams): both, upload, download or off; default both")
	f.BoolVar(&p.audio, "audio", true, "consoles play the desktop's sound (-audio=false: no sound)")
	f.BoolVar(&p.record, "record", false, "record every console session (RDP is then not offered)")
	f.BoolVar(&p.recordInput, "record-input", false, "with -record, record keystrokes too")
	f.BoolVar(&p.ownRec, "own-recordings", false, "users may play back their own recordings (in My sessions)")
	f.StringVar(&p.watch, "watch", "", "admins may watch a console: notify (the user sees who watches), consent (only once the user allows it) or off; default notify")
	f.StringVar(&p.network, "network", "", "what the pool's local desktops may reach: outbound or none; default the portal's (CORRAL_VDI_DESKTOP_NETWORK)")
	return p
}

// apply writes the flags that were given over p, and reports whether any
// was. Call it after parsing.
func (ps *policyFlagSet) apply(p *api.Policy) (bool, error) {
	given := false
	var err error
	ps.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "disconnect-grace":
			p.DisconnectGrace = ps.grace
		case "max-session":
			p.MaxSession = ps.maxSession
		case "idle-timeout":
			p.IdleTimeout = ps.idle
		case "clipboard":
			p.Clipboard = vdi.Clipboard(ps.clipboard)
		case "files":
			ft, e := fileWays(ps.files)
			if e != nil {
				err = e
			}
			p.FileTransfer = &ft
		case "audio":
			p.Audio = &ps.audio
		case "record":
			p.Record = ps.record
		case "record-input":
			p.RecordInput = ps.recordInput
		case "own-recordings":
			p.OwnRecordings = ps.ownRec
		case "watch":
			p.Watch = vdi.Watch(ps.watch)
		case "network":
			p.Network = vdi.Network(ps.network)
		default:
			return
		}
		given = true
	})
	return given, err
}

// fileWays reads -files.
func fileWays(s string) (vdi.FileTransfer, error) {
	on, off := vdi.ToggleOn, vdi.ToggleOff
	switch strings.ToLower(s) {
	case "both", "on":
		return vdi.FileTransfer{Upload: on, Download: on}, nil
	case "upload":
		return vdi.FileTransfer{Upload: on, Download: off}, nil
	case "download":
		return vdi.FileTransfer{Upload: off, Download: on}, nil
	case "off", "none":
		return vdi.FileTransfer{Upload: off, Download: off}, nil
	}
	return vdi.FileTransfer{}, usagef("-files %q: want both, upload, download or off", s)
}

// policyFlagNames lists the policy flags, for "say what to change" errors.
const policyFlagNames = "-disconnect-grace, -max-session, -idle-timeout, -clipboard, -files, -audio, -record, -record-input, -own-recordings, -watch or -network"
