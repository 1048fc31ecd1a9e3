package etcd

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"
)

// statusCounter answers status asks from a fixed table and counts them per endpoint. An
// endpoint the table lacks does not answer (its Pod is gone). The leader's answer waits until
// want asks were made in all, so that asks made at once are all counted when findLeader returns.
type statusCounter struct {
	answers map[string]Status
	want    int

	mu       sync.Mutex
	asks     map[string]int
	total    int
	allAsked chan struct{}
}

var errNoAnswer = errors.New("no answer")

func (f *statusCounter) ask(ctx context.Context, endpoint string) (Status, error) {
	f.mu.Lock()
	f.asks[endpoint]++
	f.total++
	if f.total == f.want {
		close(f.allAsked)
	}
	f.mu.Unlock()
	st, ok := f.answers[endpoint]
	if !ok {
		return Status{}, errNoAnswer
	}
	if st.Leader != 0 && st.MemberID == st.Leader {
		select {
		case <-f.allAsked:
		case <-ctx.Done():
			return Status{}, ctx.Err()
		}
	}
	return st, nil
}

func TestFindLeaderAsksTheKnownLeaderAloneWhileItLeads(t *testing.T) {
	const m1, m2, m3 = "http://m1:2379", "http://m2:2379", "http://m3:2379"
	endpoints := []string{m1, m2, m3}
	leads := func(id uint64) Status { return Status{MemberID: id, Leader: id} }
	follows := func(id, leader uint64) Status { return Status{MemberID: id, Leader: leader} }
	tests := []struct {
		name         string
		answers      map[string]Status
		known        string
		wantEndpoint string
		wantLeader   uint64
		wantAsks     map[string]int
		wantErr      bool
	}{
		{
			name:    "the known leader still leads: it alone is asked",
			answers: map[string]Status{m1: leads(1), m2: follows(2, 1), m3: follows(3, 1)},
			known:   m1, wantEndpoint: m1, wantLeader: 1,
			wantAsks: map[string]int{m1: 1},
		},
		{
			name:    "a known leader the client was not configured with (an advertised URL)",
			answers: map[string]Status{"http://leader:2379": leads(1), m1: follows(1, 1)},
			known:   "http://leader:2379", wantEndpoint: "http://leader:2379", wantLeader: 1,
			wantAsks: map[string]int{"http://leader:2379": 1},
		},
		{
			name:    "no leader known: every endpoint is asked",
			answers: map[string]Status{m1: follows(1, 2), m2: leads(2), m3: follows(3, 2)},
			known:   "", wantEndpoint: m2, wantLeader: 2,
			wantAsks: map[string]int{m1: 1, m2: 1, m3: 1},
		},
		{
			name:    "the known leader does not answer: the others are asked",
			answers: map[string]Status{m2: leads(2), m3: follows(3, 2)},
			known:   m1, wantEndpoint: m2, wantLeader: 2,
			wantAsks: map[string]int{m1: 1, m2: 1, m3: 1},
		},
		{
			name:    "the leader changed: the others are asked",
			answers: map[string]Status{m1: follows(1, 3), m2: follows(2, 3), m3: leads(3)},
			known:   m1, wantEndpoint: m3, wantLeader: 3,
			wantAsks: map[string]int{m1: 1, m2: 1, m3: 1},
		},
		{
			name:    "the known endpoint names a leader no endpoint serves",
			answers: map[string]Status{m1: follows(1, 4)},
			known:   m1, wantEndpoint: "", wantLeader: 4,
			wantAsks: map[string]int{m1: 1, m2: 1, m3: 1},
		},
		{
			name:     "no endpoint answers",
			answers:  map[string]Status{},
			known:    m1,
			wantAsks: map[string]int{m1: 1, m2: 1, m3: 1},
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := 0
			for _, n := range tt.wantAsks {
				want += n
			}
			f := &statusCounter{answers: tt.answers, want: want, asks: map[string]int{}, allAsked: make(chan struct{})}
			// Bounds a findLeader that asks fewer endpoints than the case wants: the leader's
			// answer waits for them.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			endpoint, leader, err := findLeader(ctx, f.ask, endpoints, tt.known)
			if (err != nil) != tt.wantErr || endpoint != tt.wantEndpoint || leader != tt.wantLeader {
				t.Errorf("findLeader = %q, %x, %v; want %q, %x, error %v", endpoint, leader, err, tt.wantEndpoint, tt.wantLeader, tt.wantErr)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !maps.Equal(f.asks, tt.wantAsks) {
				t.Errorf("status asks per endpoint %v, want %v", f.asks, tt.wantAsks)
			}
		})
	}
}
