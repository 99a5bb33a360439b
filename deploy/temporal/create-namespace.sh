#!/bin/sh
# Registers the namespace shopfloor uses (idempotent): run by the `temporal-namespace` job of
# compose.yaml in the temporalio/admin-tools image, once the server answers.
# Follows temporalio/samples-server compose/scripts/create-namespace.sh.
set -eu

: "${TEMPORAL_ADDRESS:?}" "${NAMESPACE:?}" "${RETENTION:?}"

tries=0
until temporal operator cluster health --address "$TEMPORAL_ADDRESS"; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { echo "Temporal at $TEMPORAL_ADDRESS is not healthy" >&2; exit 1; }
    sleep 2
done

if temporal operator namespace describe --namespace "$NAMESPACE" --address "$TEMPORAL_ADDRESS" > /dev/null 2>&1; then
    echo "namespace $NAMESPACE already exists"
else
    temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION" --address "$TEMPORAL_ADDRESS"
    echo "namespace $NAMESPACE created (retention $RETENTION)"
fi
