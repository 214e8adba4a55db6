// Package console owns what a console session needs beyond HTTP: the
// short-lived tokens that open RDP and USB streams today, and (to come)
// authorization, the path to the desktop, the upstream shared by the
// participants, and the claim's console count. Handlers keep the
// websocket upgrade and the mapping of errors to responses.
package console
