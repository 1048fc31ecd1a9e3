package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Replayed is what a replay reached.
type Replayed struct {
	// Revision is the last revision applied (the snapshot's when none was); Time when the
	// archiver received it (zero when none was applied).
	Revision int64
	Time     time.Time
	// Events is the number of puts and deletes applied.
	Events int
}

// ErrDiverged says the replay did not land where the archive says it should: the scratch
// etcd is not the snapshot the plan was made for, or a segment is not what was archived.
var ErrDiverged = errors.New("the replay diverged from the archive")

// leaseRefresh is how often the replay keeps every lease of the scratch etcd alive: none
// must expire (and delete its keys, at a revision of its own) while the archive is replayed.
const leaseRefresh = time.Second

// Replay applies, on cli (an etcd restored from a snapshot of revision base and written by
// nothing else), the changes of the planned segments (Plan) after base up to target: each
// revision in one transaction, which must land at that very revision, so the result holds
// every key with the value, create and mod revisions the source had. A put with a lease gets
// a lease of that ID, granted with the TTL the archiver recorded (etcd's shortest when it
// recorded none) unless it exists already.
func Replay(ctx context.Context, cli *clientv3.Client, store Store, plan []Meta, base int64, target Target) (Replayed, error) {
	stop := keepLeases(ctx, cli)
	defer stop()
	r := replayer{cli: cli, leases: pb.NewLeaseClient(cli.ActiveConnection()), granted: map[int64]bool{}, done: Replayed{Revision: base}}
	for _, m := range plan {
		seg, err := readSegment(ctx, store, m.Name)
		if err != nil {
			return r.done, err
		}
		more, err := r.apply(ctx, seg, base, target)
		if err != nil || !more {
			return r.done, err
		}
	}
	return r.done, r.flush(ctx)
}

func readSegment(ctx context.Context, store Store, name string) (Segment, error) {
	rc, err := store.Open(ctx, name)
	if err != nil {
		return Segment{}, err
	}
	defer rc.Close() // read-only
	data, err := io.ReadAll(rc)
	if err != nil {
		return Segment{}, fmt.Errorf("reading %s: %w", name, err)
	}
	seg, err := Decode(data)
	if err != nil {
		return Segment{}, fmt.Errorf("%s: %w", name, err)
	}
	return seg, nil
}

type replayer struct {
	cli     *clientv3.Client
	leases  pb.LeaseClient
	ttls    map[int64]int64
	granted map[int64]bool
	// pending is the operations of revision rev, not applied yet.
	pending []clientv3.Op
	rev     int64
	at      time.Time
	done    Replayed
}

// apply applies seg's events after base up to target; false once the target is passed.
func (r *replayer) apply(ctx context.Context, seg Segment, base int64, target Target) (bool, error) {
	r.ttls = map[int64]int64{}
	for _, l := range seg.Leases {
		r.ttls[l.ID] = l.TTL
	}
	for _, e := range seg.Events {
		if e.Revision <= base {
			continue
		}
		if target.Revision > 0 && e.Revision > target.Revision || target.Revision == 0 && e.Time.After(target.Time) {
			return false, r.flush(ctx)
		}
		if e.Revision != r.rev {
			if err := r.flush(ctx); err != nil {
				return false, err
			}
			r.rev, r.at = e.Revision, e.Time
		}
		op, err := r.op(ctx, e)
		if err != nil {
			return false, err
		}
		r.pending = append(r.pending, op)
	}
	return true, nil
}

func (r *replayer) op(ctx context.Context, e Event) (clientv3.Op, error) {
	if e.Delete {
		return clientv3.OpDelete(string(e.Key)), nil
	}
	if e.Lease == 0 {
		return clientv3.OpPut(string(e.Key), string(e.Value)), nil
	}
	if !r.granted[e.Lease] {
		_, err := r.leases.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: e.Lease, TTL: max(r.ttls[e.Lease], 1)})
		if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
			return clientv3.Op{}, fmt.Errorf("granting lease %x: %w", e.Lease, err)
		}
		r.granted[e.Lease] = true
	}
	return clientv3.OpPut(string(e.Key), string(e.Value), clientv3.WithLease(clientv3.LeaseID(e.Lease))), nil
}

// flush applies the pending revision in one transaction and checks it landed at it.
func (r *replayer) flush(ctx context.Context) error {
	if len(r.pending) == 0 {
		return nil
	}
	resp, err := r.cli.Txn(ctx).Then(r.pending...).Commit()
	if err != nil {
		return fmt.Errorf("applying revision %d: %w", r.rev, err)
	}
	if resp.Header.Revision != r.rev {
		return fmt.Errorf("%w: revision %d was applied as %d", ErrDiverged, r.rev, resp.Header.Revision)
	}
	r.done = Replayed{Revision: r.rev, Time: r.at, Events: r.done.Events + len(r.pending)}
	r.pending = r.pending[:0]
	return nil
}

// keepLeases refreshes every lease of cli's cluster each leaseRefresh until stopped.
func keepLeases(ctx context.Context, cli *clientv3.Client) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(leaseRefresh)
		defer t.Stop()
		for {
			if resp, err := cli.Leases(ctx); err == nil {
				for _, l := range resp.Leases {
					_, _ = cli.KeepAliveOnce(ctx, l.ID)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
