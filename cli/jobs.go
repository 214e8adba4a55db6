package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// jobEvery is how often a followed job is read again.
const jobEvery = time.Second

// awaitPool follows the job raw names, when the portal answered with one
// (202: cloning or removing VMs), printing its progress lines to progress,
// until it ends; then it returns the pool's status as GET /api/vdi/pools
// lists it. An answer that is no job is returned as it is.
func (c *adminClient) awaitPool(ctx context.Context, progress io.Writer, raw json.RawMessage) (json.RawMessage, error) {
	var job vdi.Job
	if json.Unmarshal(raw, &job) != nil || job.ID == "" || job.Kind == "" {
		return raw, nil
	}
	last := ""
	for job.State == vdi.JobRunning {
		if job.Progress != last {
			fmt.Fprintf(progress, "%s %s/%s: %s\n", job.Kind, job.Namespace, job.Pool, job.Progress)
			last = job.Progress
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped following job %s; it goes on in the portal (GET /api/vdi/pools/%s/%s/job): %w", job.ID, job.Namespace, job.Pool, ctx.Err())
		case <-time.After(jobEvery):
		}
		if _, err := c.get(ctx, "/api/vdi/pools/"+job.Namespace+"/"+job.Pool+"/job", &job); err != nil {
			return nil, err
		}
	}
	if job.State == vdi.JobFailed {
		return nil, fmt.Errorf("%s of pool %s/%s failed: %s %s", job.Kind, job.Namespace, job.Pool, job.Error, job.Hint)
	}
	var pools []vdi.PoolStatus
	if _, err := c.get(ctx, "/api/vdi/pools", &pools); err != nil {
		return nil, err
	}
	for _, p := range pools {
		if p.Namespace == job.Namespace && p.Name == job.Pool {
			return json.Marshal(p)
		}
	}
	return nil, fmt.Errorf("pool %s/%s is not listed after its %s", job.Namespace, job.Pool, job.Kind)
}
