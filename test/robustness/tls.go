package robustness

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"strconv"
	"time"
)

// ClientTLS trusts caPEM, presents the pair and accepts a server certificate for serverName.
//
// The tests' etcd clients dial member addresses (the host's resolver does not know cluster
// names), and gRPC sets the TLS server name to the address it dials, whatever the
// configuration says; the certificates name the Services, not addresses. So Go's own check
// is replaced by one that verifies the chain against the CA and the certificate against
// serverName: as strict, for the name an application in the cluster would use.
func ClientTLS(caPEM, certPEM, keyPEM []byte, serverName string) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return ClientTLSWith(caPEM, serverName, pair)
}

// ClientTLSWith is ClientTLS with every CA of caPEM trusted and any number of client
// certificates (the client presents the first one the server's acceptable CAs allow): a
// client that keeps writing while a cluster moves from one CA to another.
func ClientTLSWith(caPEM []byte, serverName string, pairs ...tls.Certificate) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the PEM data")
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       pairs,
		InsecureSkipVerify: true, // verified by VerifyConnection, for serverName
		VerifyConnection: func(cs tls.ConnectionState) error {
			opts := x509.VerifyOptions{Roots: roots, DNSName: serverName, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		},
	}, nil
}

// ParseCertificate reads the first certificate of PEM data (a Secret's tls.crt).
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}

// ServedSerial is the serial number of the certificate a member serves on port to a new
// TLS connection, as a client that connects after a renewal sees it.
func ServedSerial(ip string, port int, cfg *tls.Config) (string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)), cfg)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}
