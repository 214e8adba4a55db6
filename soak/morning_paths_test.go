package soak

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A claim sent to a replica that does not hold its user's claim shard is
// forwarded to the one that does (vdi's claims by shard): two claims in
// three on three replicas. The morning's figures say which path each
// claim took, so that a storm's claims are set beside lone claims of the
// same mix.

// sentClaim is one claim's user, the replica it was sent to, and its
// time to a won Lease (0 when not read).
type sentClaim struct {
	user, replica string
	won           time.Duration
}

// shardHolders returns where the holder of each claim shard is reached,
// as the shards' Leases say.
func (e *kubeEnv) shardHolders(ctx context.Context) (map[int]string, error) {
	leases, err := e.cluster.Client.CoordinationV1().Leases(e.ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + vdi.ShardPool})
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, l := range leases.Items {
		k, err := strconv.Atoi(strings.TrimPrefix(l.Labels[vdi.LabelMember], "claimshard-"))
		if err == nil {
			out[k] = l.Annotations[vdi.AnnotationShardURL]
		}
	}
	return out, nil
}

// byPath splits claims' times to a won Lease into those their replica
// ran itself and those it forwarded, by the shards' holders now.
func byPath(claims []sentClaim, holders map[int]string) (local, forwarded []time.Duration) {
	for _, c := range claims {
		if c.won == 0 {
			continue
		}
		if holders[vdi.ShardOf(c.user, vdi.DefaultShardCount)] == c.replica {
			local = append(local, c.won)
		} else {
			forwarded = append(forwarded, c.won)
		}
	}
	return local, forwarded
}

// pathFigures says p50 and p99 of each path's claims.
func pathFigures(local, forwarded []time.Duration) string {
	return fmt.Sprintf("run by the replica asked %d (p50 %s, p99 %s), forwarded %d (p50 %s, p99 %s)",
		len(local), ms(percentile(local, 50)), ms(percentile(local, 99)),
		len(forwarded), ms(percentile(forwarded, 50)), ms(percentile(forwarded, 99)))
}

// claimsWon sums the replicas' corral_vdi_claims_won_total by member
// (warm: the standby's hits; cold: started by the claim); false when a
// replica's /metrics does not give them.
func (e *kubeEnv) claimsWon(ctx context.Context) (warm, cold float64, ok bool) {
	for _, p := range e.replicas {
		code, buf, _ := call(ctx, p.URL, "", "GET", "/metrics", "")
		w, okW := metricValue(buf, `corral_vdi_claims_won_total{member="warm"}`)
		c, okC := metricValue(buf, `corral_vdi_claims_won_total{member="cold"}`)
		if code != 200 || !okW || !okC {
			return 0, 0, false
		}
		warm, cold = warm+w, cold+c
	}
	return warm, cold, true
}
