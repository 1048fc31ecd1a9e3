#!/usr/bin/env bash
# make bench-archive (and a part of make bench): the point-in-time recovery figures, as Go
# benchmarks of internal/agent on a real etcd (the etcd the unit tests use), a directory store
# and a real MinIO on loopback (the test bed's, as the unit tests use); no Kubernetes.
# BenchmarkArchiveLag: how far the archive runs behind a steady writer, into the directory and
# into MinIO at once (s3-lag-*-x-dir: MinIO's over the directory's); BenchmarkArchiveMemory:
# the archiver's live heap at 20 and 400 segments; BenchmarkRestoreReplay: a restore of full +
# deltas from the directory and from MinIO beside the same replay by hand (x-by-hand,
# s3-x-by-hand, s3-x-dir), and its MB/s over etcd-druid's published figure (x-druid).
# ARCHIVE_BENCH picks benchmarks (a go test -bench pattern).
set -euo pipefail
cd "$(dirname "$0")/.."

hack/testbed.sh etcd 3.6.16 >/dev/null
hack/testbed.sh minio >/dev/null
GOWORK=off go test ./internal/agent/ -run '^$' -bench "${ARCHIVE_BENCH:-BenchmarkArchiveLag|BenchmarkArchiveMemory|BenchmarkRestoreReplay}" -benchtime 1x -timeout 20m
# A published fact of another project, for scale (not measured here: its own hardware and data).
echo "etcd-druid (published): 344 MB full + 232 MB deltas restored in 2 min 24 s = 4.0 MB/s; x-druid above is our MB/s over it"
