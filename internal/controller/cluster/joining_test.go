package cluster

import (
	"errors"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func TestJoiningInitialClusterNamesEveryMemberOrWaits(t *testing.T) {
	started := func(id uint64, name string) etcd.Member {
		return etcd.Member{ID: id, Name: name, PeerURLs: []string{"http://" + name + ":2380"}}
	}
	for _, tc := range []struct {
		name    string
		members []etcd.Member
		want    string // "" when it waits
	}{
		{"every member named", []etcd.Member{started(1, "db-1"), started(2, "db-2")}, "db-1=http://db-1:2380,db-2=http://db-2:2380,db-4=http://db-4:2380"},
		// After a restart out of --force-new-cluster the survivor is listed before it has
		// published its name again: a list without it could never join.
		{"a member without its name yet", []etcd.Member{{ID: 1, PeerURLs: []string{"http://db-1:2380"}}, started(2, "db-2")}, ""},
		{"a member without peer URLs", []etcd.Member{{ID: 1, Name: "db-1"}}, ""},
		{"no member list", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := joiningInitialCluster(tc.members, "db-4", "http://db-4:2380")
			if tc.want == "" {
				var w kit.Waiting
				if !errors.As(err, &w) || got != "" {
					t.Fatalf("got %q, %v; want a wait", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
