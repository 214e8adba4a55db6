// Package console owns a console session beyond HTTP: its run (Sessions:
// the history, the relay's input), its life on the desktop's claim (Held:
// opened, heartbeats, last input, closed; the same for an agent's
// screen), who watches it (Watchers) and what ends it (a newer tab of the
// holder's, KeepNewest and Takeover; an invitation's end, KeepShared and
// Invitees; control the holder takes back), the path to the desktop, the
// one screen and the shared streams each desktop has cluster-wide, and
// the short-lived tokens that open RDP and USB streams. Handlers keep
// authorization, the websocket upgrade and the mapping of errors to
// responses, and hand each upgraded session to Sessions.Run.
package console
