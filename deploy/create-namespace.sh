#!/bin/sh
# Prepares the namespaces toolgate's workers run in: the runs' namespace and
# its authority namespace (NAMESPACE-authority, or $AUTHORITY_NAMESPACE),
# where only workers write: uses claimed once and the fleet ledger. Creates
# each if it is missing, and adds toolgate's search attributes to the first (the worker is started with
# --search-attributes, so every run keeps them current):
#
#   ToolgateStatus        Keyword      the run's status (waiting_for_approval, ...)
#   ToolgatePendingTools  KeywordList  tools of the calls waiting for a decision
#   ToolgateForkedFrom    Keyword      a fork's source: WORKFLOW_ID/CALL_ID
#
# Idempotent: an existing namespace is kept, and adding a search attribute that
# already exists with the same type is a no-op (the temporal CLI refuses only a
# different type, which is then a real conflict and fails this job).
#
# Runs in temporalio/admin-tools (it ships the temporal CLI). Modelled on
# temporalio/samples-server compose/scripts/create-namespace.sh.
set -eu

NAMESPACE=${DEFAULT_NAMESPACE:-default}
AUTHORITY_NAMESPACE=${AUTHORITY_NAMESPACE:-$NAMESPACE-authority}
TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS:-temporal:7233}
TEMPORAL_HOST=$(echo "$TEMPORAL_ADDRESS" | cut -d: -f1)
TEMPORAL_PORT=$(echo "$TEMPORAL_ADDRESS" | cut -d: -f2)

echo "Waiting for the Temporal frontend port $TEMPORAL_ADDRESS..."
nc -z -w 10 "$TEMPORAL_HOST" "$TEMPORAL_PORT"

# The server binds on 0.0.0.0 (IPv4). Dial its IPv4 address, as samples-server
# does, in case the name also resolves to an IPv6 address first.
TEMPORAL_IP=$(getent ahosts "$TEMPORAL_HOST" | grep STREAM | grep -v ':' | head -1 | awk '{print $1}')
ADDRESS="${TEMPORAL_IP:-$TEMPORAL_HOST}:$TEMPORAL_PORT"
echo "Using $ADDRESS for $TEMPORAL_ADDRESS"

# retry N CMD...: runs CMD until it succeeds, at most N times, 5 s apart.
retry() {
	n=$1
	shift
	i=1
	until "$@"; do
		if [ "$i" -ge "$n" ]; then
			echo "giving up after $n attempts: $*" >&2
			return 1
		fi
		echo "not yet (attempt $i/$n), retrying in 5s: $*"
		i=$((i + 1))
		sleep 5
	done
}

echo 'Waiting for the Temporal server to be healthy...'
retry 24 temporal operator cluster health --address "$ADDRESS"

for ns in "$NAMESPACE" "$AUTHORITY_NAMESPACE"; do
	echo "Creating namespace '$ns' if it is missing..."
	temporal operator namespace describe --namespace "$ns" --address "$ADDRESS" >/dev/null 2>&1 ||
		retry 6 temporal operator namespace create --namespace "$ns" --address "$ADDRESS"
done

# A namespace that was just created can take a few seconds to be visible to
# every service: retry the search attributes for a while.
echo "Adding toolgate's search attributes to '$NAMESPACE'..."
retry 12 temporal operator search-attribute create --namespace "$NAMESPACE" --address "$ADDRESS" \
	--name ToolgateStatus --type Keyword \
	--name ToolgatePendingTools --type KeywordList \
	--name ToolgateForkedFrom --type Keyword

temporal operator search-attribute list --namespace "$NAMESPACE" --address "$ADDRESS"
echo "Namespaces '$NAMESPACE' and '$AUTHORITY_NAMESPACE' are ready for toolgate"
