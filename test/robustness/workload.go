package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Workload is a set of clients putting, reading and compare-and-swapping a few keys under
// Prefix, and putting keys written once (the log), while a watcher follows the prefix.
type Workload struct {
	// Clients are the etcd clients, one per workload client; each should reach the cluster
	// the way an application does (the client Service).
	Clients []*clientv3.Client
	// Refresh is called with a client after one of its operations failed, to point it at the
	// members the Service routes to now. Optional.
	Refresh func(context.Context, *clientv3.Client)
	Prefix  string
	// Keys is the number of registers (keys overwritten by puts and CAS).
	Keys int
	// Seed makes the choice of operations reproducible.
	Seed uint64
	// Pace is the pause between two operations of one client.
	Pace time.Duration
	// OpTimeout bounds one operation.
	OpTimeout time.Duration
	// MaxOps bounds the operations of one client.
	MaxOps int
}

// Run drives the workload until ctx ends or every client did MaxOps operations, with a
// watcher on the prefix from the revision before the first write. It then reads every key
// (recorded, so that the checkers see the final state) and waits until the watcher has seen
// up to the last revision. It returns the final value of every key.
func (w Workload) Run(ctx context.Context, h *History) (map[string]string, error) {
	if len(w.Clients) == 0 {
		return nil, errors.New("workload without clients")
	}
	start, err := currentRevision(ctx, w.Clients[0])
	if err != nil {
		return nil, fmt.Errorf("revision before the workload: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	rec := h.NewWatch(w.Prefix)
	rec.StartRevision = start + 1
	go follow(watchCtx, w.Clients[len(w.Clients)-1], rec)

	var wg sync.WaitGroup
	for i, cli := range w.Clients {
		wg.Go(func() { w.client(ctx, h, i, cli) })
	}
	wg.Wait()

	final, err := w.readBack(context.WithoutCancel(ctx), h)
	if err != nil {
		return nil, err
	}
	end, err := currentRevision(context.WithoutCancel(ctx), w.Clients[0])
	if err != nil {
		return nil, err
	}
	catchUp(context.WithoutCancel(ctx), w.Clients[len(w.Clients)-1], rec, end)
	return final, nil
}

func (w Workload) register(i int) string { return fmt.Sprintf("%s/reg/%02d", w.Prefix, i) }

// client is one client's loop: every operation recorded with its invocation and response.
func (w Workload) client(ctx context.Context, h *History, id int, cli *clientv3.Client) {
	rnd := rand.New(rand.NewPCG(w.Seed, uint64(id)))
	last := map[string]string{} // the value this client last saw per key, for its CAS
	failing := false
	for seq := 0; seq < w.MaxOps && ctx.Err() == nil; seq++ {
		value := fmt.Sprintf("c%d-%d", id, seq)
		key := w.register(rnd.IntN(w.Keys))
		var in Input
		switch p := rnd.IntN(100); {
		case failing:
			// After a failure the client probes with reads until one succeeds: a write with
			// no answer stays pending for the checker, and a cluster that is down (paused,
			// or without quorum) would otherwise pile up pending writes by the hundred.
			in = Input{Kind: Get, Key: key}
		case p < 35:
			in = Input{Kind: Put, Key: key, Value: value}
		case p < 65:
			in = Input{Kind: Get, Key: key}
		case p < 85:
			in = Input{Kind: CAS, Key: key, Value: value, Expected: last[key]}
		default:
			in = Input{Kind: Put, Key: fmt.Sprintf("%s/log/%s", w.Prefix, value), Value: value}
		}
		op := w.do(ctx, h, id, cli, in)
		h.Record(op)
		failing = op.Output.Unknown
		switch {
		case op.Output.Unknown && w.Refresh != nil:
			w.Refresh(ctx, cli)
		case in.Kind == Get || (in.Kind == CAS && !op.Output.Succeeded):
			last[key] = op.Output.Value
		default:
			last[key] = in.Value
		}
		if failing {
			time.Sleep(max(w.Pace, 500*time.Millisecond)) // no busy loop against a cluster that is down
		} else {
			time.Sleep(w.Pace)
		}
	}
}

// do runs one operation against etcd and says what came back.
func (w Workload) do(ctx context.Context, h *History, id int, cli *clientv3.Client, in Input) Operation {
	opCtx, cancel := context.WithTimeout(ctx, w.OpTimeout)
	defer cancel()
	op := Operation{Client: id, Input: in, Call: h.Now()}
	var err error
	switch in.Kind {
	case Put:
		var resp *clientv3.PutResponse
		if resp, err = cli.Put(opCtx, in.Key, in.Value); err == nil {
			op.Output.Revision = resp.Header.Revision
		}
	case Get:
		var resp *clientv3.GetResponse
		if resp, err = cli.Get(opCtx, in.Key); err == nil && len(resp.Kvs) > 0 {
			op.Output.Value = string(resp.Kvs[0].Value)
		}
	case CAS:
		op.Output, err = compareAndSwap(opCtx, cli, in)
	}
	op.Return = h.Now()
	op.Output.Unknown = err != nil
	return op
}

// compareAndSwap puts in.Value if the key holds in.Expected (or is absent, for ""), else
// reads the key, in one transaction.
func compareAndSwap(ctx context.Context, cli *clientv3.Client, in Input) (Output, error) {
	cmp := clientv3.Compare(clientv3.Value(in.Key), "=", in.Expected)
	if in.Expected == "" {
		cmp = clientv3.Compare(clientv3.CreateRevision(in.Key), "=", 0)
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.Key, in.Value)).Else(clientv3.OpGet(in.Key)).Commit()
	if err != nil {
		return Output{}, err
	}
	out := Output{Succeeded: resp.Succeeded}
	if resp.Succeeded {
		out.Revision = resp.Header.Revision
		return out, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		out.Value = string(kvs[0].Value)
	}
	return out, nil
}

// readBack reads every register (recorded as operations) and the whole prefix, retrying
// for up to two minutes while the cluster settles.
func (w Workload) readBack(ctx context.Context, h *History) (map[string]string, error) {
	cli := w.Clients[0]
	for i := range w.Keys {
		in := Input{Kind: Get, Key: w.register(i)}
		if err := retry(ctx, func() error {
			op := w.do(ctx, h, len(w.Clients), cli, in)
			if op.Output.Unknown {
				w.refresh(ctx, cli)
				return errors.New("final read of " + in.Key + " failed")
			}
			h.Record(op)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	final := map[string]string{}
	err := retry(ctx, func() error {
		readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.Get(readCtx, w.Prefix+"/", clientv3.WithPrefix())
		if err != nil {
			w.refresh(ctx, cli)
			return err
		}
		for _, kv := range resp.Kvs {
			final[string(kv.Key)] = string(kv.Value)
		}
		return nil
	})
	return final, err
}

func (w Workload) refresh(ctx context.Context, cli *clientv3.Client) {
	if w.Refresh != nil {
		w.Refresh(ctx, cli)
	}
}

func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func currentRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	var rev int64
	err := retry(ctx, func() error {
		readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.Get(readCtx, "robustness-revision-probe")
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	})
	return rev, err
}

// follow watches the record's prefix from its start revision until ctx ends. A stream that
// breaks (its member lost the leader, or went away) is opened again after the last revision
// received; a compacted revision ends the watch, since events were lost to it.
func follow(ctx context.Context, cli *clientv3.Client, rec *WatchRecord) {
	next := rec.StartRevision
	for ctx.Err() == nil {
		ch := cli.Watch(clientv3.WithRequireLeader(ctx), rec.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithProgressNotify())
		for resp := range ch {
			if resp.CompactRevision != 0 {
				rec.Fail(fmt.Sprintf("revision %d compacted (up to %d)", next, resp.CompactRevision))
				return
			}
			if resp.IsProgressNotify() {
				rec.Progress(resp.Header.Revision)
				continue
			}
			events := make([]WatchEvent, 0, len(resp.Events))
			for _, e := range resp.Events {
				events = append(events, WatchEvent{Key: string(e.Kv.Key), Value: string(e.Kv.Value),
					Revision: e.Kv.ModRevision, Delete: e.Type == clientv3.EventTypeDelete})
			}
			rec.Add(events...)
			if last := rec.LastRevision(); last >= next {
				next = last + 1
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// catchUp asks for progress notifications until the watcher has covered revision end, for at
// most two minutes; a watcher that does not get there fails its record.
func catchUp(ctx context.Context, cli *clientv3.Client, rec *WatchRecord, end int64) {
	deadline := time.Now().Add(2 * time.Minute)
	for rec.Covered() < end {
		if time.Now().After(deadline) {
			rec.Fail(fmt.Sprintf("saw up to revision %d, not %d, within two minutes after the run", rec.Covered(), end))
			return
		}
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = cli.RequestProgress(clientv3.WithRequireLeader(reqCtx))
		cancel()
		time.Sleep(500 * time.Millisecond)
	}
}
