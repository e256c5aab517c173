#!/usr/bin/env bash
# One command for the parallel-computing study: measures mlp_train on the machine at hand (CPU,
# GPU and MPI where present, PyTorch and JAX where installed) and writes REPORT.md, its PNG plots
# and results.json into out/study (--out docs/study: the published report; tools/study/study.py
# says what and how).
# Usage: tools/study.sh [--quick] [--out DIR] [--repeats N] [--only 1,2,...] [--replot FILE]
#        tools/study.sh --help
# The study runs under the first Python that has matplotlib (python3 on the PATH, then Debian's
# /usr/bin/python3), else under python3 without plots; the peer scripts (PyTorch, JAX) always run
# under python3 from the PATH, where those frameworks are usually installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peer_python=$(command -v python3)
python=$peer_python
if ! "$python" -c 'import matplotlib' 2>/dev/null && [ -x /usr/bin/python3 ] &&
    /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    python=/usr/bin/python3
fi
exec "$python" "$root/tools/study/study.py" --peer-python "$peer_python" "$@"
