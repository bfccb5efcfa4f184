# Sourced by .ci/run and .ci/with-postgres: start_throwaway_postgres starts a PostgreSQL server for the tests (initdb in
# a temporary directory, a free loopback port, run as the `postgres` user since initdb refuses root), exports
# MFUMON_TEST_POSTGRES_URL and MFUMON_TEST_PG_ADMIN_URL, and stops and removes it when the calling shell exits.
# Needs PostgreSQL's server binaries (Debian: apt-get install postgresql).

start_throwaway_postgres() {
  local initdb
  initdb="$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -z "$initdb" ]; then
    echo "postgres: no initdb found (Debian: apt-get install postgresql)" >&2
    return 2
  fi
  PGBIN="$(dirname "$(readlink -f "$initdb")")"
  PGDATA="$(mktemp -d /tmp/mfumon-pg.XXXXXX)"
  PGPORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$PGDATA"
    as_postgres() { su postgres -s /bin/bash -c "cd / && $*"; }
  else
    as_postgres() { bash -c "$*"; }
  fi
  as_postgres "'$PGBIN/initdb' -D '$PGDATA' -A trust -U postgres --no-sync" >/dev/null
  as_postgres "'$PGBIN/pg_ctl' -D '$PGDATA' -l '$PGDATA/server.log' -w \
    -o \"-p $PGPORT -k '$PGDATA' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200\" start" >/dev/null
  trap 'as_postgres "\"$PGBIN/pg_ctl\" -D \"$PGDATA\" -m immediate stop" >/dev/null 2>&1 || true; rm -rf "$PGDATA"' EXIT
  as_postgres "'$PGBIN/psql' -h 127.0.0.1 -p $PGPORT -U postgres -qc 'CREATE DATABASE mfumon_test'"
  export MFUMON_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$PGPORT/mfumon_test"
  export MFUMON_TEST_PG_ADMIN_URL="postgresql+psycopg://postgres@127.0.0.1:$PGPORT/postgres"
}
