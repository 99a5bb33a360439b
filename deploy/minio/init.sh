#!/bin/sh
# MinIO's one-shot setup for deploy/compose.yaml (the `minio-init` job, minio/mc image):
# the blob bucket, and a user for shopfloor that can read and write that bucket only (shopfloor
# never uses MinIO's root credentials). Idempotent: runs on every `up`.
set -eu

: "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}" "${BLOB_BUCKET:?}" "${BLOB_ACCESS_KEY:?}" "${BLOB_SECRET_KEY:?}"

tries=0
until mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" > /dev/null; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { echo "MinIO did not come up" >&2; exit 1; }
    sleep 2
done

mc mb --ignore-existing "local/$BLOB_BUCKET"

# What shopfloor's S3 blob store calls: HeadObject (s3:GetObject, plus s3:ListBucket so a
# missing key answers 404 rather than 403), GetObject and PutObject.
policy=/tmp/shopfloor-blobs.json
cat > "$policy" <<JSON
{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": ["arn:aws:s3:::$BLOB_BUCKET"]},
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": ["arn:aws:s3:::$BLOB_BUCKET/*"]}
  ]
}
JSON
mc admin policy create local shopfloor-blobs "$policy"
mc admin user add local "$BLOB_ACCESS_KEY" "$BLOB_SECRET_KEY"
mc admin policy attach local shopfloor-blobs --user "$BLOB_ACCESS_KEY" 2> /dev/null \
    || echo "policy shopfloor-blobs was already attached to $BLOB_ACCESS_KEY"
echo "bucket $BLOB_BUCKET ready for $BLOB_ACCESS_KEY"
