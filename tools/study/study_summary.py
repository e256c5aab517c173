"""Summaries of tools/study/study.py's raw results (its results.json), shared by the report and the
plots: medians over repeats, speedups, efficiencies, Amdahl fits, per-batch phase times.
Standard library only; no figure here is typed in, every one is computed from the results.
"""
from study_fit import fit_amdahl, median

PEER_NAMES = {"pytorch": "PyTorch", "jax": "JAX"}


def number(value, digits=3):
    """value with `digits` significant digits (whole numbers from 1000 on); '–' for None."""
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def median_epoch(epoch_times):
    """The median epoch after the first (a warm-up), or the only epoch."""
    return median(epoch_times[1:] or epoch_times)


# ---------------------------------------------------------------- 1. implementations

def implementation_rows(section):
    """One row per mlp_train case and per peer mode: times, accuracy, speedup over the baseline.
    A row's "total_s" is the sum of its epochs' training passes, scaled to the target epoch count
    ("scaled": True) where fewer epochs ran; peers report only a median epoch, so theirs is
    target epochs x that median ("scaled": True as well)."""
    rows = []
    for case in section["cases"]:
        runs = case["runs"]
        row = {"label": case["label"], "device": case["device"], "impl": case["impl"], "batch": case["batch"],
               "workers": workers_text(case), "baseline": case.get("baseline", False), "measured": bool(runs),
               "epochs_run": case["epochs"], "target_epochs": case["target_epochs"], "repeats": len(runs)}
        if runs:
            scale = case["target_epochs"] / case["epochs"]
            row.update(total_s=median([sum(r["epoch_times"]) * scale for r in runs]),
                       epoch_s=median([median_epoch(r["epoch_times"]) for r in runs]),
                       wall_s=median([r["wall_s"] for r in runs]),
                       accuracy=median([r["test_accuracy"] for r in runs]), lr=runs[0]["lr"],
                       scaled=scale != 1, description=runs[0]["description"])
        rows.append(row)
    rows += peer_rows(section.get("peers", []), section["cases"][0]["target_epochs"] if section["cases"] else 10)
    baseline = next((r for r in rows if r["baseline"] and r["measured"]), None)
    for row in rows:
        if baseline and row["measured"]:
            row["speedup"] = baseline["total_s"] / row["total_s"]
    return rows, baseline


def workers_text(case):
    if case.get("ranks"):
        return f"{case['ranks']} ranks x {case.get('threads') or 1} thread"
    if case["device"] == "cpu":
        return f"{case['threads']} thread" + ("s" if case["threads"] != 1 else "")
    return "GPU"


def peer_rows(peers, target_epochs):
    groups = {}
    for peer in peers:
        groups.setdefault((peer["peer"], peer["device"], peer["mode"]), []).append(peer)
    rows = []
    for (name, device, mode), runs in groups.items():
        epoch = median([r["epoch_s"] for r in runs])
        label = " ".join(part for part in (PEER_NAMES.get(name, name), runs[0]["version"], mode) if part)
        rows.append({"label": f"{label} ({device.upper()})",
                     "device": device, "impl": mode, "workers": "GPU" if device == "gpu" else "all threads",
                     "baseline": False, "measured": True, "epochs_run": f"{runs[0]['epochs_timed'] + 1} ({runs[0]['epochs_timed']} timed)",
                     "target_epochs": target_epochs, "repeats": len(runs), "total_s": epoch * target_epochs,
                     "epoch_s": epoch, "wall_s": None, "accuracy": median([r["test_accuracy"] for r in runs]),
                     "lr": runs[0]["lr"], "scaled": True, "peer": True})
    return rows


# ---------------------------------------------------------------- 2. and 3. scaling

def scaling_summary(series):
    """{"label", "kind", "points": [{"workers", "time_s", "speedup", "efficiency", "repeats"}],
    "fit": AmdahlFit or None} for one series of {workers: [times]} (JSON keys are strings)."""
    times = {int(p): t for p, t in series["times"].items() if t}
    points = []
    base = median(times[1]) if 1 in times else None
    for p in sorted(times):
        t = median(times[p])
        speedup = base / t if base else None
        points.append({"workers": p, "time_s": t, "speedup": speedup,
                       "efficiency": speedup / p if speedup else None, "repeats": len(times[p])})
    return {"label": series["label"], "kind": series["kind"], "impl": series["impl"], "points": points,
            "fit": fit_amdahl(times) if base else None}


def all_scaling(results):
    """The summaries of the thread series and the MPI series that were measured."""
    summaries = []
    for section in ("threads", "processes"):
        for series in (results.get(section) or {}).get("series", []):
            summaries.append(scaling_summary(series))
    return summaries


# ---------------------------------------------------------------- 4. batch size

def batch_rows(section):
    """One row per (device, batch) with a full-length run: the median over the runs of their median
    epoch and images/s, and the accuracy of the full-length (first) run."""
    rows = []
    for point in section["points"]:
        runs = point["runs"]
        if not runs or len(runs[0]["epoch_times"]) != section["epochs"]:
            continue  # the run with the accuracy failed
        rows.append({"device": point["device"], "batch": point["batch"], "lr": runs[0]["lr"],
                     "epoch_s": median([median_epoch(r["epoch_times"]) for r in runs]),
                     "images_per_s": median([median(r["images_per_s"][1:] or r["images_per_s"]) for r in runs]),
                     "accuracy": runs[0]["test_accuracy"], "epochs": section["epochs"], "runs": len(runs)})
    return rows


# ---------------------------------------------------------------- 5. transfers

def per_batch_phases(phases):
    """(h2d, compute, d2h) milliseconds per batch of one epoch's --profile phases."""
    steps = max(phase_count(phases, "forward"), phase_count(phases, "compute"), phase_count(phases, "h2d"), 1)
    compute = sum(phase_ms(phases, name) for name in ("forward", "backward", "update", "compute"))
    return phase_ms(phases, "h2d") / steps, compute / steps, phase_ms(phases, "d2h") / steps


def phase_ms(phases, name):
    return (phases.get(name) or {}).get("ms", 0.0)


def phase_count(phases, name):
    return (phases.get(name) or {}).get("count", 0)


def transfer_rows(section):
    """One row per (batch, placement): median per-batch h2d, compute, d2h over the epochs after
    the first of every repeat, and the median epoch."""
    rows = []
    for case in section["cases"]:
        epochs = [per_batch_phases(p) for run in case["runs"] for p in run["phases"][1:] or run["phases"]]
        if not epochs:
            rows.append({"batch": case["batch"], "placement": case["placement"], "measured": False})
            continue
        rows.append({"batch": case["batch"], "placement": case["placement"], "measured": True,
                     "h2d_ms": median([e[0] for e in epochs]), "compute_ms": median([e[1] for e in epochs]),
                     "d2h_ms": median([e[2] for e in epochs]),
                     "epoch_s": median([median_epoch(r["epoch_times"]) for r in case["runs"]]),
                     "repeats": len(case["runs"])})
    return rows


# ---------------------------------------------------------------- 6. the ladder

def ladder_series(rows):
    """{impl: [(size, GFLOP/s, vs_library)]} of the verified square GEMMs in mlp_bench CSV rows."""
    series = {}
    for row in rows or []:
        if row.get("status") != "ok" or not row.get("rate"):
            continue
        series.setdefault(row["impl"], []).append(
            (int(row["size"]), float(row["rate"]), float(row["vs_library"]) if row.get("vs_library") else None))
    for points in series.values():
        points.sort()
    return series


def is_library(impl):
    return impl.startswith("blas")
