package snapshotstore

import (
	"errors"
	"fmt"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
)

// CredentialSource is where an S3 client's credentials come from.
type CredentialSource string

// The sources of the default chain, in the order the AWS SDKs try them.
const (
	// CredentialsStatic: keys given (S3Config) or in the environment (the credentials Secret).
	CredentialsStatic CredentialSource = "static keys"
	// CredentialsWebIdentity: a projected ServiceAccount token traded at STS for a role's
	// keys (IRSA and its like).
	CredentialsWebIdentity CredentialSource = "web identity"
	// CredentialsContainer: the container credentials endpoint (ECS, EKS Pod Identity).
	CredentialsContainer CredentialSource = "container credentials endpoint"
	// CredentialsInstance: the instance metadata service (the node's instance role).
	CredentialsInstance CredentialSource = "instance metadata"
)

// Environment variables of the default chain, as the AWS SDKs and the webhooks that inject
// them (IRSA, EKS Pod Identity) name them.
const (
	EnvSessionToken         = "AWS_SESSION_TOKEN"
	EnvWebIdentityTokenFile = "AWS_WEB_IDENTITY_TOKEN_FILE"
	EnvRoleARN              = "AWS_ROLE_ARN"
	// EnvSTSEndpoint is the STS endpoint for web identity; AWS's regional one when unset.
	EnvSTSEndpoint          = "AWS_ENDPOINT_URL_STS"
	EnvContainerRelativeURI = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
	EnvContainerFullURI     = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
)

// Credentials is the source ChooseCredentials picked and what it needs.
type Credentials struct {
	Source CredentialSource
	// AccessKeyID, SecretKey and SessionToken of CredentialsStatic.
	AccessKeyID, SecretKey, SessionToken string
	// STSEndpoint of CredentialsWebIdentity: "" for AWS's, chosen by region.
	STSEndpoint string
	// Detail names what the source uses, for messages (never a secret).
	Detail string
}

// ChooseCredentials picks the S3 credentials as the AWS SDKs' default chain does, in its
// order: the keys cfg gives, keys in the environment (where the agents get the credentials
// Secret's), web identity, the container credentials endpoint, instance metadata. It is pure
// (getenv is os.Getenv outside tests), so that which source a Pod's environment selects is
// tested without the cloud behind it. minio-go's own chain is not used: it hides why each
// source failed and falls back to anonymous requests, which a store refuses with only
// "Access Denied".
func ChooseCredentials(cfg S3Config, getenv func(string) string) Credentials {
	if cfg.AccessKeyID != "" && cfg.SecretKey != "" {
		return Credentials{Source: CredentialsStatic, AccessKeyID: cfg.AccessKeyID, SecretKey: cfg.SecretKey, Detail: "given"}
	}
	id, secret := getenv(request.EnvAWSAccessKeyID), getenv(request.EnvAWSSecretAccessKey)
	switch {
	case id != "" && secret != "":
		return Credentials{Source: CredentialsStatic, AccessKeyID: id, SecretKey: secret, SessionToken: getenv(EnvSessionToken),
			Detail: request.EnvAWSAccessKeyID + " and " + request.EnvAWSSecretAccessKey}
	case getenv(EnvWebIdentityTokenFile) != "":
		detail := fmt.Sprintf("token %s, role %q", getenv(EnvWebIdentityTokenFile), getenv(EnvRoleARN))
		if sts := getenv(EnvSTSEndpoint); sts != "" {
			detail += ", STS " + sts
		}
		return Credentials{Source: CredentialsWebIdentity, STSEndpoint: getenv(EnvSTSEndpoint), Detail: detail}
	case getenv(EnvContainerRelativeURI) != "" || getenv(EnvContainerFullURI) != "":
		return Credentials{Source: CredentialsContainer, Detail: getenv(EnvContainerRelativeURI) + getenv(EnvContainerFullURI)}
	}
	return Credentials{Source: CredentialsInstance, Detail: credentials.DefaultIAMRoleEndpoint}
}

// ErrCredentialsUnavailable says the default chain gave no credentials.
var ErrCredentialsUnavailable = errors.New("no S3 credentials")

// provider is the minio-go provider of the chosen source. Every source but static keys is
// minio-go's IAM provider, which reads the same environment in the same order; the region
// picks AWS's regional STS endpoint when the environment names none (AWS_REGION first).
func (c Credentials) provider(region string) credentials.Provider {
	if c.Source == CredentialsStatic {
		return &credentials.Static{Value: credentials.Value{
			AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretKey, SessionToken: c.SessionToken, SignerType: credentials.SignatureV4,
		}}
	}
	return &namedProvider{Provider: &credentials.IAM{Endpoint: c.STSEndpoint, Region: region}, creds: c}
}

// namedProvider says, when its source fails, which source it was and what it used: an IMDS
// timeout would otherwise read as the S3 endpoint being unreachable.
type namedProvider struct {
	credentials.Provider
	creds Credentials
}

func (p *namedProvider) wrap(v credentials.Value, err error) (credentials.Value, error) {
	if err != nil {
		return v, fmt.Errorf("%w from %s (%s): %w; name a credentials Secret, or give the agents' ServiceAccount a cloud identity", ErrCredentialsUnavailable, p.creds.Source, p.creds.Detail, err)
	}
	return v, nil
}

// RetrieveWithCredContext implements credentials.Provider.
func (p *namedProvider) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	return p.wrap(p.Provider.RetrieveWithCredContext(cc))
}

// Retrieve implements credentials.Provider.
func (p *namedProvider) Retrieve() (credentials.Value, error) {
	return p.wrap(p.Provider.Retrieve()) //nolint:staticcheck // the interface's own method
}
