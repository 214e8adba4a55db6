package vdi

import "context"

// A desktop that stopped under its user (it crashed, ran out of memory, an
// admin stopped it) is never a dead end: its holder starts it again
// (Start: a persistent desktop keeps its disk) or gets a fresh one in its
// place (StartFresh: an ephemeral desktop is made anew from its pool's
// source). Why it stopped, in the backend's words, is for admins; its
// user reads plain words (plainFor).

// FailedPlain is what a user who is not an admin reads of a failed desktop.
const FailedPlain = "It stopped on its own (it may have crashed or run out of memory). An admin can see why."

// plainFor returns d as id may read it: an admin gets the backend's
// diagnostics, anyone else plain words.
func plainFor(id Identity, d Desktop) Desktop {
	if !id.Admin && d.Power == PowerFailed {
		d.Reason = FailedPlain
	}
	return d
}

// StartFresh gives the holder of an ephemeral desktop (or an admin) a fresh
// one in its place: the member is recreated from its
// pool's source and started, and the claim stays, so the same console page
// opens it (open consoles drop and reconnect). A persistent desktop keeps its disk: Start is its way back.
func (s *Service) StartFresh(ctx context.Context, id Identity, ref Ref) error {
	if err := id.May(ScopeClaim); err != nil {
		return err
	}
	d, err := s.Desktop(ctx, id, ref)
	if err != nil {
		return err
	}
	if d.Mode != ModeEphemeral {
		return Errorf(EConflict, "Start it again instead: it keeps its disk.", "Desktop %s is persistent; it cannot be made fresh.", ref)
	}
	if d.Holder == "" {
		return Errorf(EConflict, "Get a desktop from its pool on the home page.", "Desktop %s is not claimed.", ref)
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "start-fresh", Namespace: ref.Namespace, Target: ref.Name, Detail: "holder " + d.Holder})
	if err := s.backend.Recreate(ctx, ref); err != nil {
		return &Error{Code: EUnavailable, Err: err, Msg: "Desktop " + ref.String() + " could not be made fresh.", Hint: "Try again; if it keeps failing, release it and get another."}
	}
	if err := s.backend.Start(ctx, ref); err != nil {
		s.log.Error("start failed", "desktop", ref, "err", err)
		return &Error{Code: EUnavailable, Err: err, Msg: "Desktop " + ref.String() + " was made fresh but did not start.",
			Hint: "Try again; if it keeps failing, release it and get another, or ask an admin."}
	}
	return nil
}
