#!/usr/bin/env bash
# The README's two Quickstart commands as a new user runs them: a fresh clone, a fresh `python3 -m venv`, an empty
# pip cache. Prints, per command, the wall time, the CPU time, the venv's size after it, and the load average
# before and after (the machine may be shared: state the load next to the times).
#
#   bash bench/fresh_install.sh [REPO] [first|both]     (REPO: a path or URL to clone; default: this checkout)
#
# docs/ci.md ("Fresh machine") holds the figures measured with it.
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
which=${2:-both}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
git clone -q "$repo" "$root/clone"
cd "$root/clone"
python3 -m venv "$root/venv"
# shellcheck disable=SC1091
source "$root/venv/bin/activate"
export PIP_NO_CACHE_DIR=1 # an empty pip cache, as on a fresh machine
echo "commit $(git rev-parse --short HEAD); $(nproc) cores; python $(python --version 2>&1)"
echo "fresh venv: $(du -sm "$root/venv" | cut -f1) MB"

measure() { # NAME COMMAND
  local name=$1 command=$2 start end
  echo "== $name: $command"
  echo "   load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s.%N)
  /usr/bin/time -f "   cpu: %U s user + %S s system; max rss %M KB" bash -c "set -e; $command" >"$root/$name.log" 2>&1 ||
    {
      tail -30 "$root/$name.log"
      echo "   FAILED"
      exit 1
    }
  end=$(date +%s.%N)
  tail -3 "$root/$name.log"
  echo "   wall: $(python -c "print(f'{$end - $start:.1f}')") s"
  echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "   venv: $(du -sm "$root/venv" | cut -f1) MB"
}

# the two commands, read from the README as tests/test_install.py reads them
mapfile -t commands < <(python - <<'EOF'
import re
readme = open("README.md", encoding="utf-8").read()
section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0].split("\n**", 1)[0]
for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
    print(block.strip())
EOF
)
measure first "${commands[0]}"
if [ "$which" = both ]; then
  measure second "${commands[1]}"
fi
