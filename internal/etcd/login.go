package etcd

import (
	"context"
	"errors"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// authenticateMethod is the gRPC method clientv3 logs in with.
const authenticateMethod = "/etcdserverpb.Auth/Authenticate"

// loginWatch follows the logins clientv3 makes with the client's own credentials: at New,
// and again when etcd answers ErrUserEmpty or an expired token. While authentication is off,
// etcd answers such a login with ErrAuthNotEnabled, and clientv3 keeps going without a token.
// Once authentication is on, a request without a token is taken for no user (ErrUserEmpty,
// after which clientv3 logs in again) or, where the client presents a certificate and etcd
// runs --client-cert-auth, for the user the certificate's common name names. The operator's
// own certificate names no user: etcd answers "user name not found" and clientv3 never logs
// in again, so such a client stays without root for as long as it is kept.
type loginWatch struct {
	user, password string
	// authOff: the last login with these credentials found authentication off.
	authOff atomic.Bool
}

// intercept runs inside clientv3's retrying interceptor, so it sees every attempt.
func (w *loginWatch) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method != authenticateMethod {
		return err
	}
	// Authenticate(user, password) of the Auth interface checks another password through
	// the same connection; it changes nothing in the client's own login.
	if r, ok := req.(*etcdserverpb.AuthenticateRequest); !ok || r.Name != w.user || r.Password != w.password {
		return err
	}
	switch {
	case err == nil:
		w.authOff.Store(false)
	case errors.Is(rpctypes.Error(err), rpctypes.ErrAuthNotEnabled):
		w.authOff.Store(true)
	}
	return err
}

// LoggedInWhileAuthOff reports whether cli holds a user name and password that its last login
// could not use, because etcd had authentication off then: it sends no token. A client kept
// across the moment someone else turns authentication on (a legacy operator, a user with
// etcdctl) is then refused what only root may do; a new client logs in. False for clients
// without credentials. Fakes report it by the same method.
func LoggedInWhileAuthOff(cli Client) bool {
	c, ok := cli.(interface{ LoggedInWhileAuthOff() bool })
	return ok && c.LoggedInWhileAuthOff()
}

// LoggedInWhileAuthOff is the package function of the same name for this client.
func (c *client) LoggedInWhileAuthOff() bool { return c.login != nil && c.login.authOff.Load() }
