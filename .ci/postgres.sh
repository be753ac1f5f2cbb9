# A throwaway PostgreSQL server for the tests: sourced by .ci/run, and usable by hand the same way:
#
#   source .ci/postgres.sh
#   start_postgres /tmp/some-new-dir     # exports AGENT_LAB_TEST_POSTGRES_DSN
#   ...                                  # run the tests
#   stop_postgres                        # stops the server (the caller removes the directory)
#
# The server comes from Debian's `postgresql` package (apt-get), not from a pip wheel: it is the
# PostgreSQL that production hosts run, maintained with security updates, and the same binaries on a
# developer's machine and in CI; the wheels that bundle a server are third-party rebuilds of it.
# The cluster lives in the given directory, listens on 127.0.0.1 only (a free port) and on a socket in
# that directory, and accepts one user, agent_lab, with a random password (scram-sha-256).
# PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
# (created if missing), which must be able to reach the directory (see start_postgres).

postgres_bindir() {
  # initdb and pg_ctl are not on PATH on Debian (only wrappers are): look in the versioned directory.
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1
}

install_postgres() {
  if [ "$(id -u)" != 0 ]; then
    echo "postgres: PostgreSQL is not installed, and installing it needs root (apt-get install postgresql)" >&2
    return 1
  fi
  echo "postgres: installing Debian's postgresql package" >&2
  apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
}

start_postgres() {
  local dir=$1 bin port password
  local -a as_server=()
  bin=$(postgres_bindir)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    install_postgres || return 1
    bin=$(postgres_bindir)
  fi
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
    echo "postgres: initdb/pg_ctl not found after installing postgresql" >&2
    return 1
  fi
  mkdir -p "$dir" || return 1
  if [ "$(id -u)" = 0 ]; then
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres || return 1
    chown postgres "$dir" || return 1
    # The server must reach its directory: let it pass through each parent (search only, no listing).
    local parent=$dir
    while parent=$(dirname "$parent") && [ "$parent" != / ]; do
      chmod o+x "$parent" 2>/dev/null || true
    done
    as_server=(runuser -u postgres --)
  fi
  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077 && printf '%s\n' "$password" >"$dir/pwfile") || return 1
  [ "$(id -u)" != 0 ] || chown postgres "$dir/pwfile"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || return 1
  "${as_server[@]}" "$bin/initdb" -D "$dir/data" -U agent_lab --pwfile="$dir/pwfile" --auth=scram-sha-256 \
    -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 || { echo "postgres: initdb failed:" >&2; cat "$dir/initdb.log" >&2; return 1; }
  rm -f "$dir/pwfile"
  "${as_server[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null ||
    { echo "postgres: the server did not start:" >&2; cat "$dir/server.log" >&2; return 1; }
  POSTGRES_DIR=$dir
  POSTGRES_BIN=$bin
  POSTGRES_AS_SERVER=("${as_server[@]}")
  export AGENT_LAB_TEST_POSTGRES_DSN="host=127.0.0.1 port=$port dbname=postgres user=agent_lab password=$password connect_timeout=10"
  echo "postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir/data)"
}

stop_postgres() {
  if [ -n "${POSTGRES_DIR:-}" ] && [ -d "$POSTGRES_DIR/data" ]; then
    "${POSTGRES_AS_SERVER[@]}" "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  POSTGRES_DIR=
}
