package portal

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelTokenKey is the label on the reclaim leader's Lease that carries the
// id of the key it signs RDP tokens with (handlers.Handler.TokenKeyID):
// every replica compares its own with it when a leader appears.
const LabelTokenKey = "corral.dev/vdi-token-key"

// compareTokenKey reads the reclaim Lease once another replica leads and
// logs an error when that replica signs RDP tokens with another key:
// consoles opened through one of them would then fail on the other.
func (m *Main) compareTokenKey(ctx context.Context, leader string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := m.kube.CoordinationV1().Leases(m.Config.Kube.Namespace).Get(ctx, ReclaimerLease, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() == nil {
			m.Log.Warn("compare token keys with the reclaim leader", "err", err)
		}
		return
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != leader {
		return // it moved on meanwhile; the next leader is compared in turn
	}
	theirs, mine := l.Labels[LabelTokenKey], m.handler.TokenKeyID()
	if theirs == "" || theirs == mine {
		return
	}
	m.Log.Error("replicas sign RDP tokens with different keys: a console opened through one fails on the other; give every replica the same CORRAL_VDI_TOKEN_KEYS (deploy/: Secret key token-keys)",
		"leader", leader, "leaderTokenKey", theirs, "identity", m.identity, "tokenKey", mine)
}
