package etcdsim

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// clusterBytes is the heap n three-member clusters (named as the operator names them) take,
// per cluster.
func clusterBytes(tb testing.TB, n int) float64 {
	tb.Helper()
	before := heapInUse()
	s := New(Options{})
	for i := range n {
		if _, err := s.Bootstrap("tok", membersOf(etcdCluster(fmt.Sprintf("namespace-%d", i)), "db-0", "db-1", "db-2")); err != nil {
			tb.Fatal(err)
		}
	}
	after := heapInUse()
	runtime.KeepAlive(s)
	return float64(after-before) / float64(n)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkClusters reports what a three-member cluster costs: go test -bench Clusters
// -benchtime 1x ./etcdsim/ for 5,000 of them.
func BenchmarkClusters(b *testing.B) {
	var perCluster float64
	for b.Loop() {
		perCluster = clusterBytes(b, 5000)
	}
	b.ReportMetric(perCluster, "bytes/cluster")
}

// The package doc promises about 1.4 KiB a cluster; 5,000 clusters must stay far below what
// the machine has for the operator and kube-apiserver.
func TestClusterMemoryIsSmall(t *testing.T) {
	if got := clusterBytes(t, 1000); got > 4096 {
		t.Fatalf("%.0f bytes per three-member cluster; want at most 4 KiB", got)
	}
}

// Many clients at once on many clusters: run with -race.
func TestConcurrentClusters(t *testing.T) {
	s := New(Options{})
	addr := serveSim(t, s)
	var wg sync.WaitGroup
	for i := range 8 {
		_, members := bootstrap(t, s, fmt.Sprintf("ns-%d", i))
		cli := dial(t, addr, members[0].ClientURLs[0], members[1].ClientURLs[0])
		joiner := membersOf(etcdCluster(fmt.Sprintf("ns-%d", i)), "db-3")[0]
		wg.Go(func() {
			added, err := cli.MemberAddAsLearner(ctx(t), joiner.PeerURLs)
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				if _, err := cli.MemberList(ctx(t)); err != nil {
					t.Error(err)
				}
			}
			if _, err := cli.MemberPromote(ctx(t), added.Member.ID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
