package vdi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// SampleBucket is the span of one PoolSample: the dashboard's day chart
// shows buckets of it, its week chart hours.
const SampleBucket = 5 * time.Minute

// PoolSample is what was seen of a pool in one bucket of time: by one
// replica, or by all of them merged (SampleStore).
type PoolSample struct {
	Namespace, Pool string
	// Start is the bucket's start.
	Start time.Time
	// Size, Claimed and Warm are the most members, claimed members and
	// warm free members (running or starting, unclaimed) seen; Free the
	// fewest free members.
	Size, Claimed, Free, Warm int
	// Refused counts claims refused for want of a free member
	// (ErrNoneFree).
	Refused int
	// Reclaims counts the reclaim loop's reclaims by rule, in
	// ReclaimRules' order.
	Reclaims [len(ReclaimRules)]int
}

// SampleStore keeps the pools' samples (store.DB). AddPoolSample merges a
// sample into its bucket: peaks by the highest, Free by the lowest,
// counts added, so replicas sampling the same pools do not double count.
type SampleStore interface {
	AddPoolSample(ctx context.Context, s PoolSample) error
}

// sampler is the Service's part of the pools' samples: the refusals and
// reclaims counted here since they were last written, and the last sample
// written of each pool (an unchanged one is not written again).
type sampler struct {
	mu      sync.Mutex
	pending map[Ref]*PoolSample // by Ref{Namespace, Name: pool}
	written map[Ref]PoolSample
}

// note adds to the pool's pending counts through add.
func (s *sampler) note(namespace, pool string, add func(*PoolSample)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := Ref{Namespace: namespace, Name: pool}
	if s.pending == nil {
		s.pending = map[Ref]*PoolSample{}
	}
	if s.pending[ref] == nil {
		s.pending[ref] = &PoolSample{}
	}
	add(s.pending[ref])
}

// refused counts a claim on the pool refused for want of a free member:
// the pool was full then, whatever the next sample sees.
func (s *sampler) refused(p Pool) {
	s.note(p.Namespace, p.Name, func(ps *PoolSample) {
		ps.Refused++
		ps.Claimed = max(ps.Claimed, p.Size)
	})
}

// reclaimed counts a reclaim on the pool by rule.
func (s *sampler) reclaimed(namespace, pool, rule string) {
	if i, ok := ruleIndex(rule); ok {
		s.note(namespace, pool, func(ps *PoolSample) { ps.Reclaims[i]++ })
	}
}

// take removes and returns the pool's pending counts.
func (s *sampler) take(ref Ref) PoolSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out PoolSample
	if p := s.pending[ref]; p != nil {
		out = *p
		delete(s.pending, ref)
	}
	return out
}

// SamplePools writes each pool's sample of now to the SampleStore (none:
// nothing): its members claimed, free and warm, with the refusals and
// reclaims this portal counted since the last write. RunSampler calls it
// on every replica; their writes merge (SampleStore).
func (s *Service) SamplePools(ctx context.Context) error {
	if s.samples == nil {
		return nil
	}
	pools, err := s.walkPools(ctx)
	if err != nil {
		return err
	}
	start := s.now().Truncate(SampleBucket)
	var errs []error
	for _, p := range pools {
		ref := Ref{Namespace: p.Namespace, Name: p.Name}
		got := PoolSample{Namespace: p.Namespace, Pool: p.Name, Start: start, Size: p.Size, Claimed: len(p.held)}
		for _, m := range p.members {
			if p.held[m.Name] == nil && m.Power.warm() {
				got.Warm++
			}
		}
		counts := s.sampling.take(ref)
		got.Refused, got.Reclaims = counts.Refused, counts.Reclaims
		got.Claimed = max(got.Claimed, counts.Claimed)
		got.Free = max(got.Size-got.Claimed, 0)
		if s.sampling.unchanged(ref, got) {
			continue
		}
		if err := s.samples.AddPoolSample(ctx, got); err != nil {
			s.sampling.note(p.Namespace, p.Name, func(ps *PoolSample) { // kept for the next round
				ps.Refused += got.Refused
				ps.Claimed = max(ps.Claimed, counts.Claimed)
				for i, n := range got.Reclaims {
					ps.Reclaims[i] += n
				}
			})
			errs = append(errs, fmt.Errorf("sample pool %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		s.sampling.wrote(ref, got)
	}
	return errors.Join(errs...)
}

// unchanged reports whether got adds nothing to what was last written of
// its pool: same bucket, same levels, no counts.
func (s *sampler) unchanged(ref Ref, got PoolSample) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.written[ref]
	return ok && got.Refused == 0 && got.Reclaims == [len(ReclaimRules)]int{} &&
		last.Start.Equal(got.Start) && last.Size == got.Size && last.Claimed == got.Claimed && last.Warm == got.Warm
}

// wrote remembers got as the last sample written of its pool.
func (s *sampler) wrote(ref Ref, got PoolSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = map[Ref]PoolSample{}
	}
	got.Refused, got.Reclaims = 0, [len(ReclaimRules)]int{}
	s.written[ref] = got
}

// RunSampler samples the pools (SamplePools) every interval until ctx
// ends. Every replica runs it, leading the reclaim loop or not: each
// writes the refusals and reclaims it counted.
func (s *Service) RunSampler(ctx context.Context, every time.Duration) {
	if s.samples == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.SamplePools(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("sample pools", "err", err)
			}
		}
	}
}
