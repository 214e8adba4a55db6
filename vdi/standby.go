package vdi

import (
	"context"
	"errors"
	"time"
)

// Warm standby: a pool's standby free members are kept powered on, so that
// a claim hands one out at once instead of waiting for a boot. Claims
// already prefer running free members; KeepStandby starts free stopped
// members until the pool has as many warm ones as StandbyWant says (never
// more than it has), and the rest stay off until claimed. A released
// ephemeral member is recreated by its release before it can enter
// standby, so no one gets a desktop another user touched. KeepStandby
// never stops a member: a lower standby lets the extra ones go as they are
// claimed.

// standbyStartTimeout bounds one standby start; startSamples is how many of a
// pool's last standby starts its start time is the mean of.
const (
	standbyStartTimeout = 5 * time.Minute
	startSamples        = 5
)

// KeepStandby starts the free members each pool's standby is short of and
// returns how many it started. Starts run in the background, one per
// member at a time; a member still starting counts as warm.
func (s *Service) KeepStandby(ctx context.Context) (int, error) {
	pools, err := s.backend.Pools(ctx)
	if err != nil {
		return 0, err
	}
	started := 0
	var errs []error
	for _, p := range pools {
		if p.Standby.IsZero() && p.StandbySchedule.IsZero() {
			continue
		}
		cold, short, err := s.standbyShort(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range cold[:min(max(short, 0), len(cold))] {
			if !s.startingStandby(m.Ref()) {
				continue
			}
			started++
			go func() {
				defer s.doneStandby(m.Ref())
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), standbyStartTimeout)
				defer cancel()
				begin := s.now()
				if err := s.backend.Start(sctx, m.Ref()); err != nil {
					s.log.Warn("standby start failed", "desktop", m.Ref(), "err", err)
					return
				}
				s.noteStart(p, s.now().Sub(begin))
				s.log.Info("standby member ready", "desktop", m.Ref(), "pool", p.Name)
			}()
		}
	}
	return started, errors.Join(errs...)
}

// StandbyWant returns how many free members pool p keeps warm now, given
// held, its live Leases: its standby for its claim rate (ClaimRate,
// every replica's claims) and the pool's start time (Standby.Want),
// raised to its schedule's floor within its hours.
func (s *Service) StandbyWant(p Pool, held map[string]*Lease) int {
	now := s.now()
	shares := 1
	if sh, ok := shareOf(s.spread.replicas); ok {
		shares = sh.count()
	}
	return max(p.Standby.Want(ClaimRate(held, now), s.startTime(p), shares), p.StandbySchedule.Floor(now))
}

// noteStart records how long a standby start of one of p's members took.
func (s *Service) noteStart(p Pool, took time.Duration) {
	s.standbyMu.Lock()
	defer s.standbyMu.Unlock()
	ref := Ref{Namespace: p.Namespace, Name: p.Name}
	ts := append(s.startTimes[ref], took)
	s.startTimes[ref] = ts[max(len(ts)-startSamples, 0):]
}

// startTime returns the mean of p's last standby starts on this replica,
// DefaultStartTime before one finished.
func (s *Service) startTime(p Pool) time.Duration {
	s.standbyMu.Lock()
	defer s.standbyMu.Unlock()
	ts := s.startTimes[Ref{Namespace: p.Namespace, Name: p.Name}]
	if len(ts) == 0 {
		return DefaultStartTime
	}
	var sum time.Duration
	for _, t := range ts {
		sum += t
	}
	return sum / time.Duration(len(ts))
}

// standbyShort returns the pool's free stopped members, best first (see
// placeStandby), and how many of them the standby needs started.
func (s *Service) standbyShort(ctx context.Context, p Pool) (cold []Member, short int, err error) {
	held, err := s.held(ctx, p.Namespace, p.Name)
	if err != nil {
		return nil, 0, err
	}
	members, err := s.backend.Members(ctx, p.Namespace, p.Name)
	if err != nil {
		return nil, 0, err
	}
	var warm []Member
	for _, m := range members {
		if held[m.Name] != nil || m.AssignedTo != "" {
			continue // claimed, or its pre-Lease holder's
		}
		switch {
		case m.Power.warm() || s.isStartingStandby(m.Ref()):
			warm = append(warm, m)
		case m.Power == PowerStopped:
			cold = append(cold, m)
		}
	}
	return placeStandby(s.spread.replicas, warm, cold), s.StandbyWant(p, held) - len(warm), nil
}

// placeStandby orders cold, a pool's free stopped members, so that
// starting them from the first spreads the warm ones across the live
// replicas' shares (claim_share.go): each next one is of the share with
// the fewest warm members (counting warm, the free ones warm already, and
// those before it), the lowest share first on a tie. A replica's claims
// try its own share's warm members first, where no other replica's
// claims race them, so a warm group piled in one share would send the
// other replicas' claims to race for it. Without shares cold is as it was.
func placeStandby(r Replicas, warm, cold []Member) []Member {
	sh, ok := shareOf(r)
	if !ok || len(cold) == 0 {
		return cold
	}
	count := make([]int, sh.count())
	for _, m := range warm {
		count[sh.owner(m)]++
	}
	byShare := make([][]Member, sh.count())
	for _, m := range cold {
		o := sh.owner(m)
		byShare[o] = append(byShare[o], m)
	}
	out := make([]Member, 0, len(cold))
	for len(out) < len(cold) {
		next := -1
		for i, ms := range byShare {
			if len(ms) > 0 && (next < 0 || count[i] < count[next]) {
				next = i
			}
		}
		out = append(out, byShare[next][0])
		byShare[next] = byShare[next][1:]
		count[next]++
	}
	return out
}

// AcquireNotifier is a Leases store that reports claims as they happen,
// every replica's (the Kubernetes backend's Lease informer).
type AcquireNotifier interface {
	OnAcquire(f func())
}

// startingStandby marks ref as being started for standby; false when it
// already is.
func (s *Service) startingStandby(ref Ref) bool {
	s.standbyMu.Lock()
	defer s.standbyMu.Unlock()
	if s.standbyStarts[ref] {
		return false
	}
	s.standbyStarts[ref] = true
	return true
}

func (s *Service) isStartingStandby(ref Ref) bool {
	s.standbyMu.Lock()
	defer s.standbyMu.Unlock()
	return s.standbyStarts[ref]
}

func (s *Service) doneStandby(ref Ref) {
	s.standbyMu.Lock()
	defer s.standbyMu.Unlock()
	delete(s.standbyStarts, ref)
}

// kickStandby asks the standby loop to look again now (a claim or a
// release changed what is free).
func (s *Service) kickStandby() {
	select {
	case s.standbyKick <- struct{}{}:
	default:
	}
}
