package main

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// leaseName is the operator's leader-election Lease (cmd/etcd-operator).
const leaseName = "etcd-operator.cozystack.io"

// atRest is what the operator costs while its clusters need nothing.
type atRest struct {
	clusters        int
	window          time.Duration
	operatorWrites  map[string]float64 // by HTTP method, Lease renewals taken out
	leaseRenewals   int
	apiserverWrites map[string]float64 // every client's, by verb and resource
	requests        map[string]float64 // the operator's, reads included, by HTTP method
	reconcile       latency
	rssBytes        float64
	heapBytes       float64
}

// idle waits for the clusters scale made to be quiet, then counts the API requests over
// the window: the operator's own (client-go's counter in the operator) and every client's
// writes (the apiserver's counter), to name the resource if there are any.
func (b *bench) idle(ctx context.Context) (*atRest, error) {
	logf("counting API requests for %s after %s", b.opts.idleWindow, b.opts.idleWarmup)
	if err := sleep(ctx, b.opts.idleWarmup); err != nil {
		return nil, err
	}
	return b.countWrites(ctx)
}

func (b *bench) allSettled(ctx context.Context, ns string) error {
	list := &etcdv1.EtcdClusterList{}
	if err := b.k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		if err := settledStatus(&list.Items[i], 1); err != nil {
			return fmt.Errorf("%s: %w", list.Items[i].Name, err)
		}
	}
	return nil
}

func (b *bench) countWrites(ctx context.Context) (*atRest, error) {
	renewals, err := b.watchLease(ctx)
	if err != nil {
		return nil, err
	}
	from := time.Now()
	opBefore, apiBefore, err := b.scrape(ctx)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, b.opts.idleWindow); err != nil {
		return nil, err
	}
	to := time.Now()
	opAfter, apiAfter, err := b.scrape(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.sameOperator(opAfter); err != nil {
		return nil, err
	}
	r := &atRest{
		clusters:        b.opts.clusters + b.opts.runs, // the ones timed alone stay too
		window:          to.Sub(from),
		operatorWrites:  grown(operatorWrites(opBefore), operatorWrites(opAfter)),
		leaseRenewals:   renewals(ctx, from, to),
		apiserverWrites: grown(apiserverWrites(apiBefore), apiserverWrites(apiAfter)),
		requests:        grown(operatorRequests(opBefore), operatorRequests(opAfter)),
		reconcile:       reconcileLatency(opBefore, opAfter),
		rssBytes:        opAfter.value(residentMemory),
		heapBytes:       opAfter.value(heapInUse),
	}
	// The metrics endpoint's reviews of the bench's own scrapes are POSTs that store nothing.
	if r.operatorWrites["POST"] -= reviews(apiAfter) - reviews(apiBefore); r.operatorWrites["POST"] <= 0 {
		delete(r.operatorWrites, "POST")
	}
	// Renewing the Lease is a PUT the operator makes whether or not it has clusters.
	if r.operatorWrites["PUT"] -= float64(r.leaseRenewals); r.operatorWrites["PUT"] == 0 {
		delete(r.operatorWrites, "PUT")
	}
	return r, nil
}

// sameOperator fails when the operator process is not the one the bench started with: it
// restarted, or someone deployed another build onto the cluster mid-run, and the numbers
// would not be one operator's.
func (b *bench) sameOperator(now families) error {
	if started := now.value(processStarted); started != b.operatorStarted {
		return fmt.Errorf("the operator process changed during the bench (started at %.0f, now %.0f): restarted or redeployed", b.operatorStarted, started)
	}
	return nil
}

func (b *bench) scrape(ctx context.Context) (operator, apiserver families, err error) {
	if operator, err = b.operatorMetrics(ctx); err != nil {
		return nil, nil, err
	}
	apiserver, err = b.apiserverMetrics(ctx)
	return operator, apiserver, err
}

// watchLease records when the operator renewed its leader-election Lease: client-go's
// request counter cannot tell those PUTs from others. renewals stops the watch and counts
// the renewals made between from and to by the renew time they carry, so a renewal the
// watch delivers late still falls in the right window.
func (b *bench) watchLease(ctx context.Context) (renewals func(ctx context.Context, from, to time.Time) int, err error) {
	w, err := b.k8s.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(operatorNamespace),
		client.MatchingFields{"metadata.name": leaseName})
	if err != nil {
		return nil, err
	}
	var renewed []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if lease, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified && lease.Spec.RenewTime != nil {
				renewed = append(renewed, lease.Spec.RenewTime.Time)
			}
		}
	}()
	return func(ctx context.Context, from, to time.Time) int {
		_ = sleep(ctx, time.Second) // the watch's delivery delay
		w.Stop()
		<-done
		n := 0
		for _, t := range renewed {
			if t.After(from) && !t.After(to) {
				n++
			}
		}
		return n
	}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
