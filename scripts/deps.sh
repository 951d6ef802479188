#!/usr/bin/env bash
# Install what atomflash needs, idempotently: Debian packages (apt-get update
# only when something is missing) and the pinned project virtualenv .venv.
# A second run with everything present changes nothing and takes ~1 s.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  verilator iverilog g++ make ccache
  gcc-riscv64-unknown-elf        # firmware (rv32 multilib)
  libevent-dev libjson-c-dev zlib1g-dev meson ninja-build  # litex_sim
)
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi

stamp=.venv/.deps-stamp
want=$(cat requirements.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exec scripts/sqlite.sh            # APSW with batch atomic writes (cached)
fi
echo "deps: building .venv from requirements.txt (pinned by constraints.txt)"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
log=.venv/deps.log
pip_() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@" >>"$log" 2>&1 \
           || { cat "$log" >&2; echo "deps: pip install $* failed (log above)" >&2; exit 1; }; }
: > "$log"
pip_ --upgrade pip
pip_ -r requirements.txt -c constraints.txt
pip_ --no-deps -e .
echo "$want" > "$stamp"
scripts/sqlite.sh
