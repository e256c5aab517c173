#!/usr/bin/env python3
"""The layers of the source tree, declared here once, and the rule that no #include runs back up.

A folder may include its own headers and those of any folder in a layer below its own, never
one beside it or above it (so no two folders include each other). Every include names its file
by its path from the repository root ("core/trainer.h"). Tests are not product code and may
include anything.

Usage: layering_test.py [ROOT]   (exit 1 with every offending include named)
"""
import re
import sys
from pathlib import Path

# Top to bottom. A folder's layer is the one that lists it.
LAYERS = [
    ("programs", ["app", "bench", "tools"]),        # mlp_train, mlp_bench, the probes
    ("implementations", ["cpu", "cuda"]),           # side by side: each fills in the op table
    ("core", ["core"]),                             # the trainer over core/backend.h's table
    ("leaves", ["libs", "profiling", "util"]),      # outside libraries' wrappers, NVTX, helpers
]
LAYER_OF = {folder: depth for depth, (_, folders) in enumerate(LAYERS) for folder in folders}
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def problems(root):
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCES):
        relative = path.relative_to(root)
        folder = relative.parts[0]
        if folder not in LAYER_OF:
            continue
        for name in INCLUDE.findall(path.read_text(errors="replace")):
            target = name.split("/")[0]
            exists = (root / name).is_file() or (root / (name + ".in")).is_file()  # generated
            if not exists or target not in LAYER_OF:
                yield f"{relative}: #include \"{name}\" is not a path from the repository root"
            elif target != folder and LAYER_OF[target] <= LAYER_OF[folder]:
                how = "beside" if LAYER_OF[target] == LAYER_OF[folder] else "above"
                yield f"{relative}: #include \"{name}\": {target}/ is {how} {folder}/, not below it"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    found = list(problems(root))
    for line in found:
        print("FAIL:", line, file=sys.stderr)
    order = " > ".join("{" + ", ".join(folders) + "}" for _, folders in LAYERS)
    if found:
        print(f"layering_test: {len(found)} includes break the layers {order}", file=sys.stderr)
        return 1
    print(f"layering_test: every include keeps the layers {order}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
