#!/usr/bin/env bash
# APSW with SQLite's batch atomic writes, built once into .venv (called by
# scripts/deps.sh; docs/sqlite.md "The build").
#
# SQLite is Debian's: the amalgamation is made from the `sqlite3` source
# package (`apt-get source`, deb-src added when apt has none), unchanged.
# APSW is the PyPI sdist of the release matching that SQLite (3.40.1 ->
# 3.40.1.0); its setup.cfg asks to fetch SQLite from the web during the build,
# so `pip download --no-clean` keeps its unpacked tree, the fetch is turned
# off, the local amalgamation goes into its sqlite3/ folder and the build
# gets `enable = batch_atomic_write` (SQLITE_ENABLE_BATCH_ATOMIC_WRITE).
#
# Cached: the wheel is kept in ~/.cache/atomflash/apsw (XDG_CACHE_HOME), so a
# rebuilt .venv or a fresh clone installs it in a second; a stamp in .venv
# makes a run with everything present take ~0 s.  The first build takes ~5
# min, half of it APSW's own download retries (no web here) before pip gives
# up and leaves the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

FEATURES=batch_atomic_write
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/atomflash/apsw   # outside the checkout: fresh clones reuse it
stamp=.venv/.apsw-stamp

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# The SQLite Debian ships (the candidate version of the sqlite3 package).
deb_version=$(apt-cache policy sqlite3 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$deb_version" ] || [ "$deb_version" = "(none)" ]; then
  deb_version=$(dpkg-query -W -f='${Version}' libsqlite3-0 2>/dev/null || true)
fi
[ -n "$deb_version" ] || { echo "deps: sqlite: no Debian sqlite3 version known (apt-get update?)" >&2; exit 1; }
upstream=${deb_version%%-*}                  # 3.40.1
apsw_version=${upstream}.0                   # APSW's release for that SQLite
key="apsw-$apsw_version sqlite3-$deb_version $FEATURES"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
  exit 0
fi

wheel_dir="$CACHE/wheel-$apsw_version-$deb_version"
if ! ls "$wheel_dir"/apsw-*.whl >/dev/null 2>&1; then
  echo "deps: building APSW $apsw_version on Debian's SQLite $deb_version with $FEATURES (once, ~5 min)"
  need=()
  for p in dpkg-dev tcl gcc; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    # deb-src for the same archives as the deb lines (deb822 files, else one-line ones)
    src=/etc/apt/sources.list.d/atomflash-deb-src
    if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1 && grep -qs '^Types: deb$' /etc/apt/sources.list.d/debian.sources; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | sudo_ tee "$src.sources" >/dev/null
    else
      grep -hs '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | sudo_ tee "$src.list" >/dev/null
    fi
    sudo_ apt-get update -qq
  elif [ ${#need[@]} -gt 0 ]; then
    sudo_ apt-get update -qq
  fi
  if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive sudo_ apt-get install -y -qq "${need[@]}" >/dev/null
  fi

  work=$(mktemp -d "${TMPDIR:-/tmp}/atomflash-sqlite.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log="$work/build.log"
  fail() { tail -40 "$log" >&2; echo "deps: sqlite: $* failed (log above)" >&2; exit 1; }

  # 1. the amalgamation from Debian's source package (Debian's patches applied by dpkg-source)
  fetch_src() { (cd "$work" && apt-get source -qq --download-only "sqlite3=$deb_version" >>"$log" 2>&1); }
  fetch_src || { sudo_ apt-get update -qq >>"$log" 2>&1; fetch_src; } || fail "apt-get source sqlite3=$deb_version"
  (cd "$work" && dpkg-source -x ./sqlite3_*.dsc src >>"$log" 2>&1) || fail "dpkg-source -x"
  (cd "$work/src" && ./configure >>"$log" 2>&1 && make sqlite3.c >>"$log" 2>&1) || fail "make sqlite3.c"
  grep -q "^#define SQLITE_VERSION *\"$upstream\"" "$work/src/sqlite3.h" || fail "SQLite version check ($upstream)"

  # 2. APSW's sdist, unpacked: its metadata step tries to fetch SQLite and fails (no web here),
  #    and --no-clean keeps the tree it unpacked
  mkdir -p "$work/pip"
  TMPDIR="$work/pip" .venv/bin/python -m pip download -q --disable-pip-version-check --no-clean \
      --no-deps --no-binary :all: -d "$work/dl" "apsw==$apsw_version" >>"$log" 2>&1 || true
  tree=$(dirname "$(find "$work/pip" -maxdepth 3 -name setup.py -path '*apsw*' | head -1)")
  [ -f "$tree/setup.cfg" ] || fail "pip download apsw==$apsw_version (no unpacked sdist)"

  # 3. local amalgamation, no fetch, batch atomic writes on (APSW's own --enable)
  mkdir -p "$tree/sqlite3"
  cp "$work/src/sqlite3.c" "$work/src/sqlite3.h" "$work/src/sqlite3ext.h" "$tree/sqlite3/"
  sed -i -e '/^fetch *=/d' -e '/^enable_all_extensions *=/d' -e "s/^\[build\]$/[build]\nenable = $FEATURES/" "$tree/setup.cfg"
  grep -q "^enable = $FEATURES" "$tree/setup.cfg" || fail "setup.cfg edit"

  # 4. the wheel, kept
  .venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps \
      -w "$work/wheel" "$tree" >>"$log" 2>&1 || fail "building APSW"
  mkdir -p "$wheel_dir"
  cp "$work"/wheel/apsw-*.whl "$wheel_dir/"
fi

.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
    "$wheel_dir"/apsw-*.whl >/dev/null
.venv/bin/python - "$upstream" "$FEATURES" <<'EOF'
import sys, apsw
want, features = sys.argv[1], sys.argv[2]
assert apsw.sqlitelibversion() == want, (apsw.sqlitelibversion(), want)
opts = apsw.compile_options
for f in features.split(","):
    assert "ENABLE_" + f.upper() in opts, (f, opts)
EOF
echo "$key" > "$stamp"
echo "deps: APSW $apsw_version (SQLite $deb_version, $FEATURES) installed"
