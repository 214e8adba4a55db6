package kube

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Who may use a pool and what one user may hold of it (vdi.Access,
// vdi.Limits) live with the pool's other settings: on every member VM of a
// VM pool in AnnotationAccess, and in a CT pool's ConfigMap under
// CTKeyAccess and CTKeyLimits, e.g.
//
//	access: '{"users": ["alice@example.com"], "groups": ["finance"]}'
//	limits: '{"desktopsPerUser": 1}'
//
// Every replica reads them from there, so all agree.
const (
	AnnotationAccess  = "corral.dev/vdi-access"  // {"access": {...}, "limits": {...}}
	AnnotationStandby = "corral.dev/vdi-standby" // free members kept powered on, e.g. "2" or {"min":1,"max":20}
	// AnnotationStandbySchedule raises the standby in working hours, e.g.
	// {"days":"mon-fri","from":"08:00","to":"18:00","standby":10,"timezone":"Europe/Berlin"}.
	AnnotationStandbySchedule = "corral.dev/vdi-standby-schedule"
	CTKeyAccess               = "access"
	CTKeyLimits               = "limits"
	CTKeyStandby              = "standby"
	CTKeyStandbySchedule      = "standbySchedule"
)

// accessDoc is AnnotationAccess's value.
type accessDoc struct {
	Access vdi.Access `json:"access"`
	Limits vdi.Limits `json:"limits"`
}

// accessAnnotation writes p's access and limits as AnnotationAccess holds them.
func accessAnnotation(a vdi.Access, l vdi.Limits) string {
	b, _ := json.Marshal(accessDoc{Access: a, Limits: l})
	return string(b)
}

// readAccess fills p's access and limits from AnnotationAccess's value s.
// A value that does not parse (a hand edit) is not granted: poolFrom
// closes its pool.
func readAccess(s string, p *vdi.Pool) {
	var d accessDoc
	if s != "" && json.Unmarshal([]byte(s), &d) == nil {
		p.Access, p.Limits = d.Access, d.Limits
	}
}

// SetAccess writes the pool's access and limits onto every member.
func (v *VMs) SetAccess(ctx context.Context, namespace, name string, a vdi.Access, l vdi.Limits) error {
	return v.patchMembers(ctx, namespace, name, "access", map[string]any{AnnotationAccess: accessAnnotation(a, l)})
}

// SetAccess writes the pool's access and limits into its ConfigMap.
func (c *CTs) SetAccess(ctx context.Context, namespace, name string, a vdi.Access, l vdi.Limits) error {
	return c.setConfig(ctx, namespace, name, func(d map[string]string) { setCTAccess(d, a, l) })
}

// setCTAccess writes access and limits into a CT pool ConfigMap's data.
func setCTAccess(d map[string]string, a vdi.Access, l vdi.Limits) {
	ab, _ := json.Marshal(a)
	lb, _ := json.Marshal(l)
	d[CTKeyAccess], d[CTKeyLimits] = string(ab), string(lb)
}

// SetAccess replaces who may use a pool of either kind.
func (c *Cluster) SetAccess(ctx context.Context, namespace, name string, a vdi.Access, l vdi.Limits) error {
	pa, err := c.admin(ctx, namespace, name)
	if err != nil {
		return err
	}
	return pa.SetAccess(ctx, namespace, name, a, l)
}

// parseCTAccess reads a CT pool ConfigMap's access and limits keys; bad
// words the error as parseCTPool does.
func parseCTAccess(d map[string]string, p *vdi.Pool, bad func(key, want string, err error) error) error {
	if s := d[CTKeyAccess]; s != "" {
		if err := json.Unmarshal([]byte(s), &p.Access); err != nil {
			return bad(CTKeyAccess, `who may use the pool as JSON, e.g. {"users": ["alice@example.com"], "groups": ["finance"]}`, err)
		}
	}
	if s := d[CTKeyLimits]; s != "" {
		if err := json.Unmarshal([]byte(s), &p.Limits); err != nil || p.Limits.DesktopsPerUser < 0 {
			return bad(CTKeyLimits, `limits as JSON, e.g. {"desktopsPerUser": 1}`, err)
		}
	}
	return nil
}

// standbyValue is st as AnnotationStandby (and the CT key) hold it: a
// plain number, or {"min":1,"max":20}.
func standbyValue(st vdi.Standby) string {
	b, _ := json.Marshal(st)
	return string(b)
}

// scheduleValue is sched as AnnotationStandbySchedule (and the CT key)
// hold it: JSON, or "" for none.
func scheduleValue(sched vdi.StandbySchedule) string {
	if sched.IsZero() {
		return ""
	}
	b, _ := json.Marshal(sched)
	return string(b)
}

// readStandby fills p's standby from AnnotationStandby's (or the CT key's)
// value st and its schedule from sched; what does not parse is none.
func readStandby(st, sched string, p *vdi.Pool) {
	var s vdi.Standby
	if json.Unmarshal([]byte(strings.TrimSpace(st)), &s) == nil && s.Min >= 0 && s.Max >= s.Min {
		p.Standby = s
	}
	var sc vdi.StandbySchedule
	if sched != "" && json.Unmarshal([]byte(sched), &sc) == nil {
		p.StandbySchedule = sc
	}
}

// SetStandby writes the pool's standby and schedule onto every member.
func (v *VMs) SetStandby(ctx context.Context, namespace, name string, st vdi.Standby, sched vdi.StandbySchedule) error {
	var schedule any // null deletes the annotation
	if s := scheduleValue(sched); s != "" {
		schedule = s
	}
	return v.patchMembers(ctx, namespace, name, "standby", map[string]any{AnnotationStandby: standbyValue(st), AnnotationStandbySchedule: schedule})
}

// SetStandby writes the pool's standby and schedule into its ConfigMap.
func (c *CTs) SetStandby(ctx context.Context, namespace, name string, st vdi.Standby, sched vdi.StandbySchedule) error {
	return c.setConfig(ctx, namespace, name, func(d map[string]string) {
		d[CTKeyStandby] = standbyValue(st)
		if s := scheduleValue(sched); s != "" {
			d[CTKeyStandbySchedule] = s
		} else {
			delete(d, CTKeyStandbySchedule)
		}
	})
}

// SetStandby sets the standby of a pool of either kind.
func (c *Cluster) SetStandby(ctx context.Context, namespace, name string, st vdi.Standby, sched vdi.StandbySchedule) error {
	pa, err := c.admin(ctx, namespace, name)
	if err != nil {
		return err
	}
	return pa.SetStandby(ctx, namespace, name, st, sched)
}
