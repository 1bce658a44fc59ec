# Sourced by scripts/local-stack: PostgreSQL, an optional service (`scripts/local-stack up
# postgres`): Debian's server (scripts/setup installs it), one cluster in .stack/postgres made by
# initdb on first start, trust authentication for its one user `etl`, on loopback only, fsync off
# (a test's database, not a production one). A rollup's target ([rollup] target) for the tests
# that keep one (tests/harness/postgres.py starts it for them); a bare `up` leaves it alone.

POSTGRES_SERVICES=(postgres)

postgres_bin() { find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1; }

# PostgreSQL refuses to run as root: as root, its commands run as Debian's postgres user.
as_postgres() {
  if [ "$(id -u)" = 0 ]; then echo setpriv --reuid postgres --regid postgres --clear-groups --; fi
}

start_postgres() {
  local bin data=$STACK/postgres
  local -a as
  bin=$(postgres_bin)
  if [ -z "$bin" ]; then echo "postgres: no server in /usr/lib/postgresql; run scripts/setup --tests" >&2; return 1; fi
  read -ra as <<<"$(as_postgres)"
  if [ ! -f "$data/db/PG_VERSION" ]; then
    mkdir -p "$data"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$data"; fi
    "${as[@]}" "$bin/initdb" -D "$data/db" -U etl --auth=trust -E UTF8 >"$STACK/postgres-initdb.log" 2>&1
  fi
  launch postgres "${as[@]}" "$bin/postgres" -D "$data/db" -p "$POSTGRES_PORT" -k "$data" \
    -c listen_addresses=127.0.0.1 -c fsync=off
}

postgres_running() { pid_of postgres >/dev/null; }

postgres_env() { echo "ETL_POSTGRES_URL=postgresql://etl@127.0.0.1:$POSTGRES_PORT/postgres"; }
