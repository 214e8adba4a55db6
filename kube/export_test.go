package kube

import (
	"fmt"
	"reflect"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ListedUnchanged reports an error when a caller of leases' List changed
// a Lease it was handed (they are shared and read-only, leases_shared.go):
// each shared Lease must still be what its object converts to.
func ListedUnchanged(leases vdi.Leases) error {
	l, ok := leases.(*Leases)
	if !ok {
		return nil
	}
	l.shared.mu.RLock()
	defer l.shared.mu.RUnlock()
	for key, c := range l.shared.byKey {
		if want := l.fromKube(c.obj); !reflect.DeepEqual(c.lease, want) {
			return fmt.Errorf("the Lease %s/%s List shared was changed by a caller: %+v (annotations %#v); its object converts to %+v (annotations %#v)",
				key.namespace, key.name, *c.lease, c.lease.Annotations, *want, want.Annotations)
		}
	}
	return nil
}
