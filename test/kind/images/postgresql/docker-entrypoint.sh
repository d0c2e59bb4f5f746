#!/bin/sh
# The official postgres image's first start, reduced to what the chart uses: a cluster in $PGDATA owned by
# $POSTGRES_USER with $POSTGRES_PASSWORD (scram-sha-256 over TCP), a database $POSTGRES_DB, then the server
# on every address. Made while listening on the Unix socket only, as the official image does, so that a
# TCP readiness probe never sees a half-made database.
set -eu
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"
  chmod 700 "$PGDATA"
  pwfile="$(mktemp)"
  printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
