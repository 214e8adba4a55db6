package kube

import (
	"maps"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// fromKube returns the claim o records. A Lease edited by hand into
// nonsense is not trusted: what is wrong is reported once per
// resourceVersion and set in the AnnotationInvalid annotation, and
//   - no holder: the claim is treated as expired, so the member is free to
//     take over (with the observed resourceVersion, as for any takeover);
//   - a missing, zero or negative duration: the default duration applies,
//     so a holder is neither cut off nor made permanent by a typo;
//   - no renew time: the acquire time (or the object's creation) counts;
//   - labels that do not match the Lease's name: the name is the truth
//     about which member it claims; the pool label is kept as written.
func (l *Leases) fromKube(o *coordinationv1.Lease) *vdi.Lease {
	out := &vdi.Lease{
		Namespace:       o.Namespace,
		Member:          strings.TrimPrefix(o.Name, vdi.LeasePrefix),
		Pool:            o.Labels[vdi.LabelPool],
		ResourceVersion: o.ResourceVersion,
		Annotations:     maps.Clone(o.Annotations),
	}
	var problems []string
	if m, ok := o.Labels[vdi.LabelMember]; ok && m != out.Member {
		problems = append(problems, "label "+vdi.LabelMember+"="+m+" does not match the Lease's name")
	}
	if out.Pool == "" {
		problems = append(problems, "no "+vdi.LabelPool+" label")
	}
	if s := o.Spec.LeaseDurationSeconds; s == nil || *s <= 0 {
		problems = append(problems, "leaseDurationSeconds is missing or not positive")
		out.Duration = vdi.DefaultLeaseDuration
	} else {
		out.Duration = time.Duration(*s) * time.Second
	}
	if t := o.Spec.AcquireTime; t != nil {
		out.AcquireTime = t.Time
	}
	if t := o.Spec.RenewTime; t != nil {
		out.RenewTime = t.Time
	} else {
		problems = append(problems, "no renewTime")
		out.RenewTime = out.AcquireTime
		if out.RenewTime.IsZero() {
			out.RenewTime = o.CreationTimestamp.Time
		}
	}
	if out.AcquireTime.IsZero() {
		out.AcquireTime = out.RenewTime
	}
	if h := o.Spec.HolderIdentity; h == nil || strings.TrimSpace(*h) == "" {
		problems = append(problems, "no holderIdentity")
		out.Holder, out.Duration, out.RenewTime = "", 0, time.Time{} // expired: free to take over
	} else {
		out.Holder = *h
	}
	if len(problems) > 0 {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		why := strings.Join(problems, "; ")
		out.Annotations[AnnotationInvalid] = why
		l.report(o, why)
	}
	return out
}

// report logs a malformed Lease once per resourceVersion.
func (l *Leases) report(o *coordinationv1.Lease, why string) {
	key := o.Namespace + "/" + o.Name
	l.mu.Lock()
	seen := l.reported[key] == o.ResourceVersion
	l.reported[key] = o.ResourceVersion
	l.mu.Unlock()
	if !seen {
		l.log.Warn("kube: malformed lease not trusted", "lease", key, "resourceVersion", o.ResourceVersion, "problems", why)
	}
}
