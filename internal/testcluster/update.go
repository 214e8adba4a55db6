package testcluster

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Update reads obj (by its namespace and name) from the server, applies
// change to it and writes it back, reading and applying change again
// whenever the write meets another writer's (a Conflict): KubeVirt's
// controllers, the stand-ins and the kubelet write the objects tests
// change, whenever they like, as they would in a real cluster. change must
// therefore be safe to run more than once. obj ends as written.
func Update[T client.Object](ctx context.Context, cl client.Client, obj T, change func(T)) error {
	return update(ctx, cl, obj, change, func(o client.Object) error { return cl.Update(ctx, o) })
}

// UpdateStatus is Update for obj's status subresource.
func UpdateStatus[T client.Object](ctx context.Context, cl client.Client, obj T, change func(T)) error {
	return update(ctx, cl, obj, change, func(o client.Object) error { return cl.Status().Update(ctx, o) })
}

// conflictBackoff spaces the tries of Update out over about 2.5 s, where
// client-go's retry.DefaultRetry gives up after 50 ms: a controller on a
// loaded machine may write the same object several times in that while.
var conflictBackoff = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1}

// update is Update with write doing the write.
func update[T client.Object](ctx context.Context, cl client.Client, obj T, change func(T), write func(client.Object) error) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(conflictBackoff, func() error {
		if err := cl.Get(ctx, key, obj); err != nil {
			return err
		}
		change(obj)
		return write(obj)
	})
}
