# Sourced by scripts/run and scripts/test: make .venv (once) and install the project into it.
# Installs only when the install is missing or out of date (scripts/_install_state.sh says when).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EMUBROKER_VENV:-$ROOT/.venv}"
EXTRAS="${1:-}"
source "$ROOT/scripts/_install_state.sh"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! install_is_current "$VENV" "$ROOT" "$EXTRAS"; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT${EXTRAS:+[$EXTRAS]}"
    install_record "$VENV" "$ROOT" "$EXTRAS"
fi
export PATH="$VENV/bin:$PATH"
