package report

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
)

// Redacted stands where a secret-like value was.
const Redacted = "REDACTED"

// minSecretLen: values of the cluster's Secrets shorter than this are not scrubbed by value
// ("1", "true" would mangle every file); the patterns below still catch them after a key.
const minSecretLen = 4

// publicKeys are the keys of Secret data that are no secret: a user name (etcd's root is
// "root", which scrubbing would take out of every name) and certificates, which every client
// is shown. Their values are not scrubbed.
var publicKeys = []string{"username", "user", "ca.crt", "tls.crt"}

var (
	// secretAssignment is a secret-like key followed by = or : and a value on the same line,
	// as logs, flags, JSON and YAML write them: password=..., "token": "...", --api-key=...
	secretAssignment = regexp.MustCompile(`(?i)(password|passwd|passphrase|secret|token|credentials?|(?:access|secret|private|api)[-_]?key)(["']?[ \t]*[:=][ \t]*["']?)([^\s"',;}]+)`)
	privateKeyBlock  = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`)
	bearer           = regexp.MustCompile(`(?i)(bearer)[ \t]+[A-Za-z0-9._~+/=-]+`)
	secretEnvName    = regexp.MustCompile(`(?i)(password|passwd|passphrase|secret|token|credential|(access|private|api)_?key)`)
)

// Scrubber removes secret-like text: the values of the cluster's Secrets wherever they
// appear (as they are and base64-encoded), private keys, bearer tokens and whatever follows
// a secret-like key.
type Scrubber struct {
	values []string
}

// NewScrubber scrubs the given Secrets' values besides the patterns.
func NewScrubber(secrets []map[string][]byte) *Scrubber {
	s := &Scrubber{}
	for _, data := range secrets {
		for key, v := range data {
			if len(v) < minSecretLen || slices.Contains(publicKeys, key) {
				continue
			}
			s.values = append(s.values, string(v), base64.StdEncoding.EncodeToString(v))
		}
	}
	// The longest first, so that a value containing another goes whole.
	slices.SortFunc(s.values, func(a, b string) int { return len(b) - len(a) })
	return s
}

// Text is text with everything secret-like replaced by Redacted.
func (s *Scrubber) Text(text string) string {
	for _, v := range s.values {
		text = strings.ReplaceAll(text, v, Redacted)
	}
	text = privateKeyBlock.ReplaceAllString(text, "[PRIVATE KEY "+Redacted+"]")
	text = bearer.ReplaceAllString(text, "${1} "+Redacted)
	return secretAssignment.ReplaceAllStringFunc(text, func(m string) string {
		parts := secretAssignment.FindStringSubmatch(m)
		switch strings.ToLower(parts[3]) {
		case "true", "false", "null", Redacted:
			return m // a flag's state or a value already gone, not a secret
		}
		return parts[1] + parts[2] + Redacted
	})
}

// Object strips what an object read from the API server may carry besides its state and
// could hold secrets: managedFields, kubectl's last-applied-configuration (a whole earlier
// manifest) and the values of environment variables with secret-like names.
func Object(obj map[string]any) {
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
		}
	}
	walk(obj)
}

// walk redacts, anywhere in v, the value of {name: <secret-like>, value: ...} pairs (env).
func walk(v any) {
	switch t := v.(type) {
	case map[string]any:
		if name, ok := t["name"].(string); ok && secretEnvName.MatchString(name) {
			if _, has := t["value"].(string); has {
				t["value"] = Redacted
			}
		}
		for _, child := range t {
			walk(child)
		}
	case []any:
		for _, child := range t {
			walk(child)
		}
	}
}

// secretNames are the Secrets v refers to: the name inside any *SecretRef or secret:
// {secretName} (volumes), imagePullSecrets, and valueFrom.secretKeyRef.
func secretNames(v any, into map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for key, child := range t {
			lower := strings.ToLower(key)
			switch {
			case lower == "secretname":
				if name, ok := child.(string); ok && name != "" {
					into[name] = true
				}
			case strings.Contains(lower, "secret"):
				refName(child, into)
			}
			secretNames(child, into)
		}
	case []any:
		for _, child := range t {
			secretNames(child, into)
		}
	}
}

// refName takes the name of a reference {name: ...}, or of each in a list of them.
func refName(v any, into map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		if name, ok := t["name"].(string); ok && name != "" {
			into[name] = true
		}
	case []any:
		for _, child := range t {
			refName(child, into)
		}
	}
}
