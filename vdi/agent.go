package vdi

import (
	"context"
	"strings"
	"time"
)

// AnnotationAgent names, on a claim, the agent that works in the desktop
// ("bot:alice/test-runner"), so that the dashboard and the home page say
// a bot holds it.
const AnnotationAgent = "corral.dev/vdi-agent"

// AnnotationAgentToken names, beside AnnotationAgent, the id of the token
// the agent works with: the one "Revoke the token too" at Stop revokes
// (taken from the claim, never from the request).
const AnnotationAgentToken = "corral.dev/vdi-agent-token"

// MarkAgent notes on id's claim of ref that id's agent (its token) works
// in it; a claim it already names is left as it is.
func (s *Service) MarkAgent(ctx context.Context, id Identity, ref Ref) error {
	agent := id.Agent()
	if agent == "" {
		return nil
	}
	l, err := s.leases.Get(ctx, ref)
	if err == nil && l.Annotations[AnnotationAgent] == agent && l.Annotations[AnnotationAgentToken] == id.Token.ID {
		return nil
	}
	return s.updateClaim(ctx, ref, id.Login, func(l *Lease, _ time.Time) error {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationAgent] = agent
		l.Annotations[AnnotationAgentToken] = id.Token.ID
		return nil
	})
}

// Oversight of an agent by a person, kept on the claim so that every
// replica's agent seat reads it: who took control from the agent (its
// input is refused until they hand back) and who stopped it (every call
// of an agent in the desktop is refused until they let it go on).
const (
	AnnotationAgentControl = "corral.dev/vdi-agent-control"
	AnnotationAgentStopped = "corral.dev/vdi-agent-stopped"
)

// AnnotationAgentRevoked names, beside AnnotationAgentStopped, the token
// that was revoked at that Stop ("Revoke its token too"): the agent of
// that token cannot work in the desktop again.
const AnnotationAgentRevoked = "corral.dev/vdi-agent-revoked"

// NoteAgentRevoked records on ref's claim that token, the token of the
// agent at work in it, was revoked at its Stop; a claim that names
// another token is left as it is.
func (s *Service) NoteAgentRevoked(ctx context.Context, ref Ref, token string) error {
	if token == "" {
		return nil
	}
	return s.updateClaim(ctx, ref, "", func(l *Lease, _ time.Time) error {
		if l.Annotations[AnnotationAgentToken] == token {
			l.Annotations[AnnotationAgentRevoked] = token
		}
		return nil
	})
}

// AnnotationAgentPersonInput records, on the claim of a desktop an agent
// works in, a person's latest input at one of its consoles: "alice
// 2026-12-06T01:02:03.456Z". Every replica's agent seat reads it, so the
// agent's input waits after a person's wherever either is connected.
const AnnotationAgentPersonInput = "corral.dev/vdi-agent-person-input"

// NotePersonInput records on ref's claim that login, a person (never an
// agent), sent input at a console of ref at at, when an agent works in
// the desktop; a claim that names no agent is not written.
func (s *Service) NotePersonInput(ctx context.Context, ref Ref, login string, at time.Time) error {
	l, err := s.leases.Get(ctx, ref)
	if err != nil || l.Annotations[AnnotationAgent] == "" {
		return err
	}
	return s.updateClaim(ctx, ref, "", func(l *Lease, _ time.Time) error {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationAgentPersonInput] = login + " " + at.UTC().Format(time.RFC3339Nano)
		return nil
	})
}

// personInputOf reads AnnotationAgentPersonInput.
func personInputOf(l *Lease) (string, time.Time) {
	login, at, _ := strings.Cut(l.Annotations[AnnotationAgentPersonInput], " ")
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return "", time.Time{}
	}
	return login, t
}

// The oversight actions of OverseeAgent.
const (
	OversightTake     = "take"
	OversightHandBack = "hand-back"
	OversightStop     = "stop"
	OversightGoOn     = "go-on"
)

// OverseeAgent applies action (Oversight*) to the agent at work in ref, as
// id: a person (never a token: an agent does not lift its own stop) who
// holds the desktop, or an admin. It answers the desktop as it is after.
func (s *Service) OverseeAgent(ctx context.Context, id Identity, ref Ref, action string) (Desktop, error) {
	if id.Token != nil {
		return Desktop{}, Errorf(EForbidden, "Sign in to the portal in a browser to take control of or stop an agent.",
			"A token cannot oversee an agent (%s).", id.Agent())
	}
	d, err := s.Desktop(ctx, id, ref) // first: whoever may not see it learns nothing of the action
	if err != nil {
		return Desktop{}, err
	}
	key, set := AnnotationAgentControl, true
	switch action {
	case OversightTake:
	case OversightHandBack:
		set = false
	case OversightStop:
		key = AnnotationAgentStopped
	case OversightGoOn:
		key, set = AnnotationAgentStopped, false
	default:
		return Desktop{}, Errorf(EInvalid, "Use take, hand-back, stop or go-on.", "Unknown oversight action %q.", action)
	}
	if d.Holder == "" {
		return Desktop{}, Errorf(EConflict, "Get a desktop from its pool on the home page.", "Desktop %s is not claimed.", ref)
	}
	err = s.updateClaim(ctx, ref, d.Holder, func(l *Lease, _ time.Time) error {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		switch {
		case set:
			l.Annotations[key] = id.Login
		case action == OversightGoOn && agentRevoked(l):
			// The agent stopped is gone for good: the claim names none
			// until the next agent works in the desktop.
			for _, k := range []string{AnnotationAgent, AnnotationAgentToken, AnnotationAgentRevoked, AnnotationAgentControl, AnnotationAgentStopped} {
				delete(l.Annotations, k)
			}
		default:
			delete(l.Annotations, key)
		}
		return nil
	})
	if err != nil {
		return Desktop{}, err
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: "agent-" + action, Namespace: ref.Namespace, Target: ref.Name,
		Detail: strings.TrimSpace(d.Agent + " holder " + d.Holder)})
	return s.Desktop(ctx, id, ref)
}

// agentRevoked reports whether the token of the agent l names was
// revoked at its Stop (NoteAgentRevoked).
func agentRevoked(l *Lease) bool {
	t := l.Annotations[AnnotationAgentRevoked]
	return t != "" && t == l.Annotations[AnnotationAgentToken]
}

// AgentBarred returns why an agent's call on d is refused, if it is: the
// agent was stopped (every call), or a person holds control and the call
// is input.
func AgentBarred(d Desktop, input bool) error {
	if who := d.AgentStopped; who != "" {
		return Errorf(EForbidden, "", "%s stopped the agent's work in %s/%s: every call of an agent there is refused. Stop and tell your user; %s can let it go on (Let the agent go on, on the desktop's page in the portal).",
			who, d.Namespace, d.Name, who)
	}
	if who := d.AgentControl; input && who != "" {
		return Errorf(EConflict, "", "%s took control of %s/%s: your input is suspended until they hand it back (Hand back, on the desktop's page); screenshot and wait_for_change still work.",
			who, d.Namespace, d.Name)
	}
	return nil
}
