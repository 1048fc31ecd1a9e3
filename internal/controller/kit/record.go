package kit

import (
	"context"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RecordAct writes the record of an act already taken (on etcd, or a Job created) onto obj:
// write puts the record on obj and writes it. The act cannot be taken back, so a conflict
// (obj changed meanwhile, if only its labels, or it is being deleted) must not lose its
// record, as a look again would take the act for not taken, or its outcome for another: obj
// is read again through reader and the record put on it as it now is, until it is written.
func RecordAct(ctx context.Context, reader client.Reader, obj client.Object, write func() error) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
		}
		first = false
		return write()
	})
}

// Live is the reader that reads around the cache: apiReader, or cached when a reconciler has
// none (unit tests).
func Live(apiReader, cached client.Reader) client.Reader {
	if apiReader != nil {
		return apiReader
	}
	return cached
}
