package kube

import (
	"context"
	"errors"
	"fmt"
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
	members := make([]string, p.Size)
	for i := range members {
		members[i] = p.Name + "-" + strconv.Itoa(i+1)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: CTConfigMapName(p.Name), Labels: map[string]string{LabelCTPool: p.Name}},
		Data: map[string]string{CTKeyImage: strings.TrimSpace(p.Source), CTKeyMode: string(p.Mode), CTKeyPolicy: formatPolicy(p.Policy),
			CTKeySize: strconv.Itoa(p.Size), CTKeyMembers: strings.Join(members, ",")},
	}
	made, err := c.cs.CoreV1().ConfigMaps(p.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return vdi.Errorf(vdi.EConflict, "Pick another name, or delete that ConfigMap.", "ConfigMap %s/%s exists.", p.Namespace, cm.Name)
	} else if apierrors.IsNotFound(err) {
		return vdi.Errorf(vdi.ENotFound, "Name an existing namespace.", "Namespace %s does not exist.", p.Namespace)
	} else if err != nil {
		return fmt.Errorf("kube: create ConfigMap of CT pool %s/%s: %w", p.Namespace, p.Name, err)
	}
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
// a claimed one. The ConfigMap lists the members from then on.
func (c *CTs) ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	members := p.members
	var added, dropped []string
	if size > len(members) {
		top := 0
		for _, m := range members {
			if n, err := strconv.Atoi(strings.TrimPrefix(m, name+"-")); err == nil && n > top {
				top = n
			}
		}
		for len(members)+len(added) < size {
			top++
			added = append(added, name+"-"+strconv.Itoa(top))
		}
		members = append(members[:len(members):len(members)], added...)
	} else {
		drop := len(members) - size
		var keep []string
		for i := len(members) - 1; i >= 0; i-- {
			if len(dropped) < drop && !claimed(members[i]) {
				dropped = append(dropped, members[i])
			} else {
				keep = append([]string{members[i]}, keep...)
			}
		}
		if len(dropped) < drop {
			return vdi.Errorf(vdi.EConflict, "Release some desktops first, or pick a larger size.",
				"Only %d of pool %s/%s's %d desktops are free; shrinking to %d needs %d.", len(dropped), namespace, name, len(members), size, drop)
		}
		members = keep
	}
	if err := c.writeMembers(ctx, p, members); err != nil {
		return err
	}
	// The members are out of the pool now; their Pods go after.
	pods, err := c.pods(ctx, &ctPool{Pool: p.Pool, members: dropped})
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if err := c.deletePod(ctx, vdi.Ref{Namespace: namespace, Name: pod.Name}, pod.UID); err != nil {
			return err
		}
	}
	p.members = members
	return c.warm(ctx, p, added)
}

// writeMembers updates the pool's ConfigMap to list members, failing with
// EConflict when it changed since p was read.
func (c *CTs) writeMembers(ctx context.Context, p *ctPool, members []string) error {
	cm := p.cm.DeepCopy()
	cm.Data[CTKeyMembers] = strings.Join(members, ",")
	cm.Data[CTKeySize] = strconv.Itoa(len(members))
	return c.updateConfigMap(ctx, p, cm)
}

func (c *CTs) updateConfigMap(ctx context.Context, p *ctPool, cm *corev1.ConfigMap) error {
	_, err := c.cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return vdi.Errorf(vdi.EConflict, "Look at the pool again and retry.", "Pool %s/%s changed meanwhile.", p.Namespace, p.Name)
	} else if err != nil {
		return fmt.Errorf("kube: update ConfigMap %s/%s of CT pool %s: %w", cm.Namespace, cm.Name, p.Name, err)
	}
	return nil
}

// SetPolicy writes the pool's policy into its ConfigMap.
func (c *CTs) SetPolicy(ctx context.Context, namespace, name string, pol vdi.Policy) error {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	cm := p.cm.DeepCopy()
	cm.Data[CTKeyPolicy] = formatPolicy(pol)
	return c.updateConfigMap(ctx, p, cm)
}

// DeletePool deletes a CT pool (the caller checked that nobody holds a
// member): its members' Pods, waiting until they are gone, then its
// ConfigMap, then the members' leftover Leases (released or expired).
func (c *CTs) DeletePool(ctx context.Context, namespace, name string) error {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	pods, err := c.pods(ctx, p)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		err := c.cs.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete Pod %s/%s: %w", namespace, pod.Name, err)
		}
	}
	for _, pod := range pods {
		if err := c.waitGone(ctx, vdi.Ref{Namespace: namespace, Name: pod.Name}, pod.UID); err != nil {
			return err
		}
	}
	err = c.cs.CoreV1().ConfigMaps(namespace).Delete(ctx, p.cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.cm.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete ConfigMap %s/%s of CT pool %s: %w", namespace, p.cm.Name, name, err)
	}
	leases, err := c.cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + name + "," + vdi.LabelMember})
	if err != nil {
		return fmt.Errorf("kube: list Leases of CT pool %s/%s: %w", namespace, name, err)
	}
	for _, l := range leases.Items {
		if !p.has(l.Labels[vdi.LabelMember]) {
			continue // a VM pool's of the same name
		}
		err := c.cs.CoordinationV1().Leases(namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete Lease %s/%s of CT pool %s: %w", namespace, l.Name, name, err)
		}
	}
	return nil
}
