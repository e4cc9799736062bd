#!/bin/sh
# Creates and migrates Temporal's two PostgreSQL databases (temporal and
# temporal_visibility) with temporal-sql-tool from temporalio/admin-tools.
#
# The steps are those of temporalio/samples-server compose/scripts/setup-postgres.sh
# (the successor of the archived temporalio/docker-compose). Every step is safe
# to run again: `create` ignores an existing database, `setup-schema -v 0.0`
# only adds the version tables if they are missing, and `update-schema` applies
# only the versions the database does not have yet. So `docker compose up` on
# an existing volume just checks the schema (and migrates it after an image
# upgrade).
#
# The password comes from SQL_PASSWORD (read by temporal-sql-tool itself).
set -eu

echo 'Starting PostgreSQL schema setup...'
echo 'Waiting for PostgreSQL port to be available...'
nc -z -w 10 postgresql 5432
echo 'PostgreSQL port is available'

# Create and setup temporal database
temporal-sql-tool --plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal create
temporal-sql-tool --plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal setup-schema -v 0.0
temporal-sql-tool --plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal update-schema -d /etc/temporal/schema/postgresql/v12/temporal/versioned

# Create and setup visibility database
temporal-sql-tool --plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal_visibility create
temporal-sql-tool --plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal_visibility setup-schema -v 0.0
temporal-sql-tool --plugin postgres12 --ep postgresql -u temporal -p 5432 --db temporal_visibility update-schema -d /etc/temporal/schema/postgresql/v12/visibility/versioned

echo 'PostgreSQL schema setup complete'
