package snapshotstore

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"
)

// GrowingFile is a file another goroutine is still writing: the agent's scratch file while
// etcd's stream goes into it. The S3 store uploads it part by part as it grows, each part read
// from the file where it lies (no part is held in memory, so memory does not grow with the
// part size or the number of parts in flight), and completes the upload only once Await
// reports the file complete.
type GrowingFile interface {
	io.ReaderAt
	// Await blocks until the file is longer than off or writing stopped, and returns its
	// length so far; the error is io.EOF once the file is complete and off at or past its
	// end, and the writer's failure (never io.EOF) once writing failed.
	Await(off int64) (int64, error)
}

// partsInFlight is how many parts are uploaded, or copied, at once: enough to keep the
// connection and the server busy while one part's request starts or ends.
const partsInFlight = 4

// writeGrowing uploads f to key as a multipart upload; on any failure, or a file whose writing
// failed, the upload is aborted and no object appears.
func (s *S3Store) writeGrowing(ctx context.Context, key string, f GrowingFile) error {
	return s.multipart(ctx, key, minio.PutObjectOptions{ContentType: contentType}, false, func(core minio.Core, id string) ([]minio.CompletePart, error) {
		return uploadParts(ctx, core, s.bucket, key, id, f)
	})
}

// copyObject copies src to dst on the server, partsInFlight parts of copyPartSize at once,
// with the given metadata: the object appears under dst whole, or not at all; with ifAbsent,
// only if dst does not exist (multipart).
func (s *S3Store) copyObject(ctx context.Context, src, dst string, size int64, opts minio.PutObjectOptions, ifAbsent bool) error {
	return s.multipart(ctx, dst, opts, ifAbsent, func(core minio.Core, id string) ([]minio.CompletePart, error) {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(partsInFlight)
		var done completedParts
		for n, off := 1, int64(0); off < size; n, off = n+1, off+copyPartSize {
			g.Go(func() error {
				p, err := core.CopyObjectPart(gctx, s.bucket, src, s.bucket, dst, id, n, off, min(copyPartSize, size-off), nil)
				if err == nil {
					done.add(p)
				}
				return err
			})
		}
		err := g.Wait() // before sorted: the parts are all there only then
		return done.sorted(), err
	})
}

// copyPartSize is the size of one part of a server-side copy: a 256 MiB snapshot is copied in
// 8 parts, each a request of its own.
const copyPartSize = 2 * PartSize

// multipart runs a multipart upload to key whose parts upload makes, and completes it; on any
// failure it aborts it, so that nothing appears under key. With ifAbsent the completion
// carries If-None-Match: *, and the store refuses it (PreconditionFailed) when key exists:
// the completion is the one step that makes the object appear, so that is where the
// condition goes (S3 defines it there, not on the upload's start).
func (s *S3Store) multipart(ctx context.Context, key string, opts minio.PutObjectOptions, ifAbsent bool, upload func(minio.Core, string) ([]minio.CompletePart, error)) (err error) {
	core := minio.Core{Client: s.cli}
	id, err := core.NewMultipartUpload(ctx, s.bucket, key, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = core.AbortMultipartUpload(context.WithoutCancel(ctx), s.bucket, key, id)
		}
	}()
	parts, err := upload(core, id)
	if err != nil {
		return err
	}
	complete := opts
	if ifAbsent {
		complete.SetMatchETagExcept("*")
	}
	_, err = core.CompleteMultipartUpload(ctx, s.bucket, key, id, parts, complete)
	return err
}

// completedParts collects the parts of a multipart upload as they finish, in any order.
type completedParts struct {
	mu    sync.Mutex
	parts []minio.CompletePart
}

func (c *completedParts) add(p minio.CompletePart) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts = append(c.parts, p)
}

// sorted is the parts in order, as completing the upload wants them.
func (c *completedParts) sorted() []minio.CompletePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.SortFunc(c.parts, func(a, b minio.CompletePart) int { return a.PartNumber - b.PartNumber })
	return c.parts
}

// unsignedPayload sends parts without the sha256 of their bytes in the signature, as
// minio-go does over https already: over http it would sign every 64 KiB chunk, and the
// server hash it again, to protect bytes that the read-back checks anyway.
var unsignedPayload = minio.PutObjectPartOptions{DisableContentSha256: true}

// uploadParts uploads each part as soon as it is whole in the file (or the file complete),
// partsInFlight at a time, and returns them in order.
func uploadParts(ctx context.Context, core minio.Core, bucket, key, id string, f GrowingFile) ([]minio.CompletePart, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partsInFlight)
	var done completedParts
	for n, off := 1, int64(0); ; n, off = n+1, off+PartSize {
		length, last, err := nextPart(f, off)
		if err != nil {
			_ = g.Wait()
			return nil, err
		}
		if length == 0 && n > 1 {
			break // the file ended where the previous part did
		}
		g.Go(func() error {
			p, err := core.PutObjectPart(gctx, bucket, key, id, n, io.NewSectionReader(f, off, length), length, unsignedPayload)
			if err == nil {
				done.add(minio.CompletePart{PartNumber: n, ETag: p.ETag})
			}
			return err
		})
		if last {
			break
		}
	}
	err := g.Wait() // before sorted: the parts are all there only then
	return done.sorted(), err
}

// nextPart waits until the part at off is whole, or the file complete; it returns the part's
// length and whether it is the last.
func nextPart(f GrowingFile, off int64) (int64, bool, error) {
	size, err := f.Await(off + PartSize - 1)
	switch {
	case err == nil:
		return PartSize, false, nil
	case errors.Is(err, io.EOF):
		return size - off, true, nil
	}
	return 0, false, err
}
