package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

var _ vdi.PoolAdmin = (*CTs)(nil)

// CTConfigMapName is the name of the ConfigMap the portal writes for CT
// pool pool.
func CTConfigMapName(pool string) string { return "corral-vdi-ct-" + pool }

// CreatePool writes the ConfigMap of CT pool p (p.Source is the image) and,
// for an ephemeral pool, makes its members' Pods.
func (c *CTs) CreatePool(ctx context.Context, p vdi.Pool) error {
	if p.Kind != vdi.KindCT {
		return vdi.Errorf(vdi.EInvalid, "Make vm pools from a golden VM.", "CT pools are made from an image, not %s.", p.Kind)
	}
	if strings.TrimSpace(p.Source) == "" {
		return vdi.Errorf(vdi.EInvalid, "Name the container image members run, e.g. debian:12.", "A ct pool needs an image as its source.")
	}
	if existing, err := c.configMaps(ctx, p.Namespace, p.Name); err != nil {
		return err
	} else if len(existing) > 0 {
		return vdi.Errorf(vdi.EConflict, "Resize it instead, or pick another name.", "Pool %s/%s exists.", p.Namespace, p.Name)
	}
	if p.Mode == "" {
		p.Mode = vdi.ModeEphemeral
	}
	members := numbered(p.Name, p.Size)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: CTConfigMapName(p.Name), Labels: map[string]string{LabelCTPool: p.Name}},
		Data: map[string]string{CTKeyImage: strings.TrimSpace(p.Source), CTKeyMode: string(p.Mode), CTKeyPolicy: formatPolicy(p.Policy),
			CTKeySize: strconv.Itoa(p.Size)},
	}
	if !p.Standby.IsZero() {
		cm.Data[CTKeyStandby] = standbyValue(p.Standby)
	}
	if s := scheduleValue(p.StandbySchedule); s != "" {
		cm.Data[CTKeyStandbySchedule] = s
	}
	if !p.Access.Open() || p.Limits != (vdi.Limits{}) {
		setCTAccess(cm.Data, p.Access, p.Limits)
	}
	made, err := c.cs.CoreV1().ConfigMaps(p.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return vdi.Errorf(vdi.EConflict, "Pick another name, or delete that ConfigMap.", "ConfigMap %s/%s exists.", p.Namespace, cm.Name)
	} else if apierrors.IsNotFound(err) {
		return vdi.Errorf(vdi.ENotFound, "Name an existing namespace.", "Namespace %s does not exist.", p.Namespace)
	} else if err != nil {
		return fmt.Errorf("kube: create ConfigMap of CT pool %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.configs.wrote(made)
	pool, err := parseCTPool(made)
	if err != nil {
		return err
	}
	return c.warm(ctx, pool, members)
}

// warm makes the Pods of members of an ephemeral pool; a persistent pool's
// members stay stopped until claimed.
func (c *CTs) warm(ctx context.Context, p *ctPool, members []string) error {
	if p.Mode != vdi.ModeEphemeral {
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(members))
	for i, name := range members {
		wg.Go(func() { errs[i] = c.createPod(ctx, p, name) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ResizePool grows a CT pool with new members numbered after the highest,
// or shrinks it by removing unclaimed members, highest numbers first, never
// a claimed one: each is claimed (take) before it goes. The ConfigMap lists
// the members from then on.
func (c *CTs) ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	if size == len(p.members) {
		return nil
	}
	if size > len(p.members) {
		top := 0
		for _, m := range p.members {
			if n, err := strconv.Atoi(strings.TrimPrefix(m, name+"-")); err == nil && n > top {
				top = n
			}
		}
		var added []string
		for len(p.members)+len(added) < size {
			top++
			added = append(added, name+"-"+strconv.Itoa(top))
		}
		if err := c.writeMembers(ctx, p, append(slices.Clone(p.members), added...)); err != nil {
			return err
		}
		return c.warm(ctx, p, added)
	}
	drop := len(p.members) - size
	var taken []*vdi.Lease
	gone := map[string]bool{}
	for i := len(p.members) - 1; i >= 0 && len(taken) < drop; i-- {
		m := p.members[i]
		if claimed(m) {
			continue
		}
		l, err := takeFor(ctx, c.leases, p.Namespace, p.Name, m)
		if errors.Is(err, errHeld) {
			continue
		} else if err != nil {
			return errors.Join(fmt.Errorf("kube: claim %s/%s to remove it: %w", namespace, m, err), releaseTaken(ctx, c.leases, taken))
		}
		taken, gone[m] = append(taken, l), true
	}
	if len(taken) < drop {
		return errors.Join(vdi.Errorf(vdi.EConflict, "Release some desktops first, or pick a larger size.",
			"Only %d of pool %s/%s's %d desktops are free; shrinking to %d needs %d.", len(taken), namespace, name, len(p.members), size, drop),
			releaseTaken(ctx, c.leases, taken))
	}
	keep := slices.DeleteFunc(slices.Clone(p.members), func(m string) bool { return gone[m] })
	err = c.writeMembers(ctx, p, keep)
	if err == nil {
		// The members are out of the pool now; their Pods go after.
		err = c.deletePods(ctx, &ctPool{Pool: p.Pool, members: slices.Collect(maps.Keys(gone))})
	}
	return errors.Join(err, releaseTaken(context.WithoutCancel(ctx), c.leases, taken))
}

// deletePods deletes the Pods of p's members and waits until they are gone.
func (c *CTs) deletePods(ctx context.Context, p *ctPool) error {
	pods, err := c.pods(ctx, p)
	if err != nil {
		return err
	}
	pods = slices.DeleteFunc(pods, func(pod *corev1.Pod) bool { return pod == nil })
	for _, pod := range pods {
		err := c.cs.CoreV1().Pods(p.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("kube: delete Pod %s/%s: %w", p.Namespace, pod.Name, err)
		}
	}
	for _, pod := range pods {
		if err := c.waitGone(ctx, vdi.Ref{Namespace: p.Namespace, Name: pod.Name}, pod.UID); err != nil {
			return err
		}
	}
	return nil
}

// writeMembers updates the pool's ConfigMap to hold members: its size, and
// the list of members when the size alone does not say them (a shrink left
// gaps). It fails with EConflict when the ConfigMap changed since p was
// read.
func (c *CTs) writeMembers(ctx context.Context, p *ctPool, members []string) error {
	cm := p.cm.DeepCopy()
	cm.Data[CTKeySize] = strconv.Itoa(len(members))
	if slices.Equal(members, numbered(p.Name, len(members))) {
		delete(cm.Data, CTKeyMembers)
	} else {
		cm.Data[CTKeyMembers] = strings.Join(members, ",")
	}
	return c.updateConfigMap(ctx, p, cm)
}

func (c *CTs) updateConfigMap(ctx context.Context, p *ctPool, cm *corev1.ConfigMap) error {
	made, err := c.cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err == nil {
		c.configs.wrote(made)
	}
	if apierrors.IsConflict(err) {
		return vdi.Errorf(vdi.EConflict, "Look at the pool again and retry.", "Pool %s/%s changed meanwhile.", p.Namespace, p.Name)
	} else if err != nil {
		return fmt.Errorf("kube: update ConfigMap %s/%s of CT pool %s: %w", cm.Namespace, cm.Name, p.Name, err)
	}
	return nil
}

// SetPolicy writes the pool's policy into its ConfigMap.
func (c *CTs) SetPolicy(ctx context.Context, namespace, name string, pol vdi.Policy) error {
	return c.setConfig(ctx, namespace, name, func(d map[string]string) { d[CTKeyPolicy] = formatPolicy(pol) })
}

// setConfig changes one of the pool's settings in its ConfigMap: set
// edits a copy of the data, which then replaces the ConfigMap's.
func (c *CTs) setConfig(ctx context.Context, namespace, name string, set func(d map[string]string)) error {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	cm := p.cm.DeepCopy()
	set(cm.Data)
	return c.updateConfigMap(ctx, p, cm)
}

// DeletePool deletes a CT pool (the caller checked that nobody holds a
// member): it claims every member (take; a member claimed meanwhile stops
// it with EConflict), deletes their Pods and waits until they are gone,
// deletes the ConfigMap, then the Leases it took (which also clears
// expired ones left behind).
func (c *CTs) DeletePool(ctx context.Context, namespace, name string) error {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	var taken []*vdi.Lease
	for _, m := range p.members {
		l, err := takeFor(ctx, c.leases, p.Namespace, p.Name, m)
		if errors.Is(err, errHeld) {
			return errors.Join(vdi.Errorf(vdi.EConflict, "Force-release it first, then delete the pool.",
				"Desktop %s/%s was claimed meanwhile.", namespace, m), releaseTaken(ctx, c.leases, taken))
		} else if err != nil {
			return errors.Join(fmt.Errorf("kube: claim %s/%s to remove it: %w", namespace, m, err), releaseTaken(ctx, c.leases, taken))
		}
		taken = append(taken, l)
	}
	err = c.deletePods(ctx, p)
	if err == nil {
		err = c.cs.CoreV1().ConfigMaps(namespace).Delete(ctx, p.cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.cm.UID}})
		c.configs.deleted(namespace, p.cm.Name)
		if apierrors.IsNotFound(err) {
			err = nil
		} else if err != nil {
			err = fmt.Errorf("kube: delete ConfigMap %s/%s of CT pool %s: %w", namespace, p.cm.Name, name, err)
		}
	}
	return errors.Join(err, releaseTaken(context.WithoutCancel(ctx), c.leases, taken))
}
