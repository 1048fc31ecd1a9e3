package etcdsim

import (
	"context"
	"fmt"
	"net"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Server returns a gRPC server that answers for every member of the simulation; the caller
// serves it on a listener and stops it. opts are the server's (a test's interceptor).
func (s *Sim) Server(opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(opts...)
	pb.RegisterClusterServer(g, clusterServer{s: s})
	pb.RegisterMaintenanceServer(g, maintenanceServer{s: s})
	pb.RegisterKVServer(g, kvServer{s: s})
	pb.RegisterAuthServer(g, authServer{s: s})
	return g
}

// DialOptions make clientv3 connect to addr whatever member an endpoint names; gRPC still
// sends the endpoint's host:port as :authority, which is how the simulation tells members
// apart. Put them in clientv3.Config.DialOptions.
func DialOptions(addr string) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})}
}

// Conn is a plain gRPC connection (no clientv3, so no retries) to the member whose client
// URL has host:port authority, through the simulator's listener at addr.
func Conn(addr, authority string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, grpc.WithAuthority(authority), grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// rules say what a call needs from the member it reaches, as etcd's own checks do: a learner
// refuses every unary call but Status and serializable reads (Defragment too).
type rules struct {
	// learnerOK: a learner answers it (etcd: Status and serializable reads only).
	learnerOK bool
	// quorum: it goes through raft or a linearizable read, so it needs a leader.
	quorum bool
}

var (
	local          = rules{learnerOK: true}
	quorumVoter    = rules{quorum: true}
	localVoterOnly = rules{}
)

// serve runs fn for the member the call was dialled at, holding the simulation's lock.
func serve[R any](ctx context.Context, s *Sim, r rules, fn func(c *cluster, self *member) (R, error)) (R, error) {
	var zero R
	s.mu.Lock()
	defer s.mu.Unlock()
	c, self, err := s.target(ctx)
	if err != nil {
		return zero, err
	}
	if self.learner && !r.learnerOK {
		return zero, rpctypes.ErrGRPCNotSupportedForLearner
	}
	if r.quorum && c.leader == 0 {
		return zero, rpctypes.ErrGRPCNoLeader
	}
	return fn(c, self)
}

// target finds the running member whose client URL the call was dialled at. Any other
// authority is a member that is not there, as a connection refused would be.
func (s *Sim) target(ctx context.Context) (*cluster, *member, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	authority := firstOr(md.Get(":authority"))
	e, ok := s.hosts[authority]
	if i := e.c.findIfSet(e.id); ok && i >= 0 {
		m := &e.c.members[i]
		if m.running && slices.ContainsFunc(m.clientURLs, func(u string) bool { h, _ := hostPort(u); return h == authority }) {
			return e.c, m, nil
		}
	}
	return nil, nil, status.Errorf(codes.Unavailable, "etcdsim: no running member serves %q", authority)
}

// findIfSet is find on a cluster that may be nil (a missing map entry).
func (c *cluster) findIfSet(id uint64) int {
	if c == nil {
		return -1
	}
	return c.find(id)
}

func (c *cluster) header(self uint64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: c.id, MemberId: self, Revision: c.revision, RaftTerm: c.term}
}

func (m member) pb() *pb.Member {
	return &pb.Member{ID: m.id, Name: m.name, PeerURLs: slices.Clone(m.peerURLs), ClientURLs: slices.Clone(m.clientURLs), IsLearner: m.learner}
}

func (c *cluster) pbMembers() []*pb.Member {
	out := make([]*pb.Member, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, m.pb())
	}
	return out
}

type clusterServer struct {
	pb.UnimplementedClusterServer
	s *Sim
}

func (x clusterServer) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.MemberListResponse, error) {
		return &pb.MemberListResponse{Header: c.header(self.id), Members: c.pbMembers()}, nil
	})
}

func (x clusterServer) MemberAdd(ctx context.Context, req *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	if !req.IsLearner {
		return nil, status.Error(codes.Unimplemented, "etcdsim: members join as learners only")
	}
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.MemberAddResponse, error) {
		selfID := self.id // addLearner moves the members
		added, err := x.s.addLearner(c, req.PeerURLs)
		if err != nil {
			return nil, err
		}
		// etcd answers before the new member's process can start.
		resp := &pb.MemberAddResponse{Header: c.header(selfID), Member: added.pb(), Members: c.pbMembers()}
		x.s.startAdded(c, added.id)
		return resp, nil
	})
}

func (x clusterServer) MemberRemove(ctx context.Context, req *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.MemberRemoveResponse, error) {
		selfID := self.id
		if err := x.s.remove(c, req.ID); err != nil {
			return nil, err
		}
		return &pb.MemberRemoveResponse{Header: c.header(selfID), Members: c.pbMembers()}, nil
	})
}

func (x clusterServer) MemberPromote(ctx context.Context, req *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.MemberPromoteResponse, error) {
		if err := c.promote(req.ID); err != nil {
			return nil, err
		}
		return &pb.MemberPromoteResponse{Header: c.header(self.id), Members: c.pbMembers()}, nil
	})
}

type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *Sim
}

func (x maintenanceServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	return serve(ctx, x.s, local, func(c *cluster, self *member) (*pb.StatusResponse, error) {
		resp := &pb.StatusResponse{
			Header: c.header(self.id), Version: Version, StorageVersion: "3.6.0",
			DbSize: c.dbSize, DbSizeInUse: c.dbInUse, DbSizeQuota: defaultQuota,
			Leader: c.leader, RaftIndex: c.index, RaftAppliedIndex: c.index, RaftTerm: c.term,
			IsLearner: self.learner,
		}
		for _, a := range c.alarms {
			resp.Errors = append(resp.Errors, fmt.Sprintf("memberID:%d alarm:%s ", a.MemberID, a.Alarm))
		}
		return resp, nil
	})
}

// Alarm lists, raises and disarms alarms; disarming with MemberID 0 or alarm NONE matches
// every alarm, as in etcd.
func (x maintenanceServer) Alarm(ctx context.Context, req *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.AlarmResponse, error) {
		resp := &pb.AlarmResponse{Header: c.header(self.id)}
		switch req.Action {
		case pb.AlarmRequest_GET:
			resp.Alarms = slices.Clone(c.alarms)
		case pb.AlarmRequest_ACTIVATE:
			a := &pb.AlarmMember{MemberID: req.MemberID, Alarm: req.Alarm}
			c.alarms = append(c.alarms, a)
			resp.Alarms = []*pb.AlarmMember{a}
		case pb.AlarmRequest_DEACTIVATE:
			c.alarms = slices.DeleteFunc(c.alarms, func(a *pb.AlarmMember) bool {
				match := (req.MemberID == 0 || a.MemberID == req.MemberID) && (req.Alarm == pb.AlarmType_NONE || a.Alarm == req.Alarm)
				if match {
					resp.Alarms = append(resp.Alarms, a)
				}
				return match
			})
		}
		return resp, nil
	})
}

// Defragment gives the file's free pages back: the file shrinks to what is in use.
func (x maintenanceServer) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	return serve(ctx, x.s, localVoterOnly, func(c *cluster, self *member) (*pb.DefragmentResponse, error) {
		c.dbSize = c.dbInUse
		return &pb.DefragmentResponse{Header: c.header(self.id)}, nil
	})
}

func (x maintenanceServer) MoveLeader(ctx context.Context, req *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	return serve(ctx, x.s, localVoterOnly, func(c *cluster, self *member) (*pb.MoveLeaderResponse, error) {
		if err := c.moveLeader(self.id, req.TargetID); err != nil {
			return nil, err
		}
		return &pb.MoveLeaderResponse{Header: c.header(self.id)}, nil
	})
}

type kvServer struct {
	pb.UnimplementedKVServer
	s *Sim
}

// Range finds no keys (nothing is stored) but answers as etcd does: the header carries the
// revision, a linearizable read needs the leader, a learner serves serializable reads only.
func (x kvServer) Range(ctx context.Context, req *pb.RangeRequest) (*pb.RangeResponse, error) {
	r := rules{learnerOK: req.Serializable, quorum: !req.Serializable}
	return serve(ctx, x.s, r, func(c *cluster, self *member) (*pb.RangeResponse, error) {
		if req.Revision > c.revision {
			return nil, rpctypes.ErrGRPCFutureRev
		}
		if req.Revision > 0 && req.Revision < c.compacted {
			return nil, rpctypes.ErrGRPCCompacted
		}
		return &pb.RangeResponse{Header: c.header(self.id)}, nil
	})
}

func (x kvServer) Compact(ctx context.Context, req *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.CompactionResponse, error) {
		switch {
		case req.Revision > c.revision:
			return nil, rpctypes.ErrGRPCFutureRev
		case req.Revision <= c.compacted:
			return nil, rpctypes.ErrGRPCCompacted
		}
		c.compacted = req.Revision
		c.index++
		return &pb.CompactionResponse{Header: c.header(self.id)}, nil
	})
}

// authServer: authentication is off in every simulated cluster.
type authServer struct {
	pb.UnimplementedAuthServer
	s *Sim
}

func (x authServer) AuthStatus(ctx context.Context, _ *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(c *cluster, self *member) (*pb.AuthStatusResponse, error) {
		return &pb.AuthStatusResponse{Header: c.header(self.id), Enabled: false, AuthRevision: 1}, nil
	})
}

// Authenticate is what clientv3 calls when it is given credentials; etcd refuses it while
// authentication is off, and clientv3 then goes on without a token.
func (x authServer) Authenticate(ctx context.Context, _ *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	return serve(ctx, x.s, quorumVoter, func(*cluster, *member) (*pb.AuthenticateResponse, error) {
		return nil, rpctypes.ErrGRPCAuthNotEnabled
	})
}
