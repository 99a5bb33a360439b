#!/bin/sh
# Creates (or upgrades) Temporal's two PostgreSQL databases: run by the `temporal-schema` job of
# compose.yaml in the temporalio/admin-tools image, before the server starts. Every step is
# idempotent (`create` ignores an existing database, `setup-schema -v 0.0` keeps a newer
# version, `update-schema` applies only newer migrations), so it runs on every `up`, and after a
# TEMPORAL_VERSION bump it is what migrates the schema.
# Follows temporalio/samples-server compose/scripts/setup-postgres.sh.
set -eu

: "${POSTGRES_SEEDS:?}" "${DB_PORT:?}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

echo "waiting for PostgreSQL at ${POSTGRES_SEEDS}:${DB_PORT}"
tries=0
until nc -z -w 5 "$POSTGRES_SEEDS" "$DB_PORT"; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { echo "PostgreSQL did not come up" >&2; exit 1; }
    sleep 2
done

for db in temporal:temporal temporal_visibility:visibility; do
    name=${db%%:*}
    schema=${db#*:}
    # SQL_PASSWORD is read by temporal-sql-tool itself (never on the command line).
    set -- --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" --db "$name"
    temporal-sql-tool "$@" create
    temporal-sql-tool "$@" setup-schema -v 0.0
    temporal-sql-tool "$@" update-schema -d "$SCHEMA_DIR/$schema/versioned"
done
echo "Temporal's PostgreSQL schema is up to date"
