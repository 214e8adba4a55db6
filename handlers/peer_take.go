package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A claim (or an admin's assignment) whose user's shard another replica
// holds is forwarded to it (vdi's claims by shard) as a signed peer
// request whose signature covers its whole body: whom for, from which
// pool. A leaked peer secret claims as anyone, as it opens any console
// today; a signature seen on the wire is good once and for that body.

// takeRoute is the forward's route under relay.PeerPath.
const takeRoute = "take"

// maxTakeBody bounds a forwarded take's body.
const maxTakeBody = 4 << 10

// Taker runs takes forwarded from other replicas.
type Taker interface {
	TakeForwarded(ctx context.Context, req vdi.TakeRequest) (vdi.TakeAnswer, error)
}

// takeReply is the answer to a forwarded take: the answer, or the error
// the user is told, or that this replica does not hold the shard.
type takeReply struct {
	Answer    *vdi.TakeAnswer `json:"answer,omitempty"`
	Code      vdi.Code        `json:"code,omitempty"`
	Msg       string          `json:"msg,omitempty"`
	Hint      string          `json:"hint,omitempty"`
	NotHolder bool            `json:"notHolder,omitempty"`
}

// handlePeerTake serves POST /peer/v1/take: a take another replica
// forwards to this one, which holds its user's shard. The signature must
// cover this body at this replica, once (relay.PeerPost).
func (h *peerSocket) handlePeerTake(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTakeBody))
	if err != nil {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ETooLarge, "Send a take of at most 4 KiB.", "The forwarded claim is too large."))
		return
	}
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, relay.BodyKind(takeRoute, body), "", ""); err != nil {
		h.refusePeer(w, r, vdi.Ref{}, err)
		return
	}
	var req vdi.TakeRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Login == "" || req.Namespace == "" || req.Pool == "" {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EInvalid, "Send {login, namespace, pool}.", "The forwarded claim is not one."))
		return
	}
	if h.takes == nil {
		writeJSON(w, http.StatusOK, takeReply{NotHolder: true})
		return
	}
	a, err := h.takes.TakeForwarded(r.Context(), req)
	var e *vdi.Error
	switch {
	case errors.Is(err, vdi.ErrNotHolder):
		writeJSON(w, http.StatusOK, takeReply{NotHolder: true})
	case errors.As(err, &e):
		if e.Code == vdi.EInternal || e.Code == vdi.EUnavailable {
			h.log.Warn("forwarded claim failed", "remote", r.RemoteAddr, "user", req.Login, "pool", req.Namespace+"/"+req.Pool, "err", err)
		}
		writeJSON(w, http.StatusOK, takeReply{Code: e.Code, Msg: e.Msg, Hint: e.Hint})
	case err != nil:
		h.log.Error("forwarded claim failed", "remote", r.RemoteAddr, "user", req.Login, "pool", req.Namespace+"/"+req.Pool, "err", err)
		writeJSON(w, http.StatusOK, takeReply{Code: vdi.EUnavailable, Msg: "The claim could not be completed.", Hint: "Try again; if it keeps failing, tell an admin."})
	default:
		writeJSON(w, http.StatusOK, takeReply{Answer: &a})
	}
}

// PeerTakes returns a handler of forwarded claims alone (POST
// /peer/v1/take, checked with secret, run by takes), for a process that
// serves nothing else: the conformance suite's child portals.
func PeerTakes(secret []byte, takes Taker, log *slog.Logger) http.Handler {
	h := &peerSocket{renderer: &renderer{log: log}, console: &consoleState{peers: relay.NewPeerVerifier(secret)}, takes: takes}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+relay.PeerPath+takeRoute, h.handlePeerTake)
	return mux
}

// TakeForwarder sends takes to other replicas signed with secret
// (vdi.Forwarder).
type TakeForwarder struct{ Secret []byte }

var _ vdi.Forwarder = TakeForwarder{}

// ForwardTake implements vdi.Forwarder: an answer the holder gave, its
// refusal as the *vdi.Error it was, vdi.ErrNotHolder, or another error
// when it did not answer.
func (f TakeForwarder) ForwardTake(ctx context.Context, base string, req vdi.TakeRequest) (vdi.TakeAnswer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return vdi.TakeAnswer{}, err
	}
	res, err := relay.PeerPost(ctx, base, f.Secret, takeRoute, body)
	if err != nil {
		return vdi.TakeAnswer{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return vdi.TakeAnswer{}, fmt.Errorf("peer %s: take: %s", base, res.Status)
	}
	var reply takeReply
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&reply); err != nil {
		return vdi.TakeAnswer{}, fmt.Errorf("peer %s: take: %w", base, err)
	}
	switch {
	case reply.NotHolder:
		return vdi.TakeAnswer{}, vdi.ErrNotHolder
	case reply.Answer != nil && reply.Answer.Lease != nil:
		return *reply.Answer, nil
	case reply.Code != "":
		return vdi.TakeAnswer{}, &vdi.Error{Code: reply.Code, Msg: reply.Msg, Hint: reply.Hint, Err: fmt.Errorf("answered by peer %s", base)}
	}
	return vdi.TakeAnswer{}, fmt.Errorf("peer %s: take: an empty answer", base)
}
