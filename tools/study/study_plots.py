"""The PNG figures of tools/study/study.py, drawn with matplotlib (Agg, files only) where it is
installed; where it is not, draw_all draws nothing and the report keeps its tables.

Figures: implementations.png (section 1), scaling.png (2 and 3: time, speedup with the fitted
Amdahl curves and the ideal, efficiency), batch.png (4), transfers.png (5, stacked bars of
h2d / compute / d2h per batch), ladder.png (6, GEMM GFLOP/s over size per device).
"""
import sys

import study_summary as summary

PLACEMENT_ORDER = ("resident", "pageable", "pinned", "overlapped")


def matplotlib_version():
    try:
        import matplotlib
        return {"ok": True, "version": matplotlib.__version__}
    except ImportError:
        return {"ok": False, "why": f"matplotlib is not installed for {sys.executable}"}


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot
    return matplotlib.pyplot


def draw_all(results, folder):
    """{figure name: file name} of the figures drawn into folder."""
    if not matplotlib_version()["ok"]:
        return {}
    drawn = {}
    for name, draw in (("implementations", draw_implementations), ("scaling", draw_scaling),
                       ("batch", draw_batch), ("transfers", draw_transfers), ("ladder", draw_ladder)):
        figure = draw(pyplot(), results)
        if figure is not None:
            figure.tight_layout()
            figure.savefig(folder / f"{name}.png", dpi=110)
            pyplot().close(figure)
            drawn[name] = f"{name}.png"
    return drawn


def machine_title(results):
    machine, gpu = results["machine"], results["capabilities"]["gpu"]
    gpus = machine["gpus"][0].split(",")[0] if machine["gpus"] else gpu.get("description", "GPU")
    gpus = gpus if gpu["ok"] else "no GPU used"
    quick = " [--quick smoke run]" if results["settings"]["quick"] else ""
    return f"{machine['cpu']['model']}, {results['cores']} cores; {gpus}; {machine['date']}{quick}"


def integer_ticks(axes, values):
    """Ticks at the measured values of a log2 axis, labelled as plain numbers."""
    values = sorted(set(values))
    axes.set_xticks(values)
    axes.set_xticklabels([str(v) for v in values])
    axes.minorticks_off()


def draw_implementations(plt, results):
    if "implementations" not in results:
        return None
    rows = [r for r in summary.implementation_rows(results["implementations"])[0] if r["measured"]]
    if not rows:
        return None
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.6))
    labels = [f"{r['label']} ({r['workers']})" for r in rows]
    colors = ["tab:orange" if r.get("peer") else "tab:green" if r["device"] == "gpu" else "tab:blue" for r in rows]
    axes.barh(labels, [r["total_s"] for r in rows], color=colors)
    for index, row in enumerate(rows):
        speedup = f", {summary.number(row['speedup'])}x" if row.get("speedup") else ""
        text = f" {row['total_s']:.3g} s{speedup}"
        axes.text(row["total_s"], index, text + (" (scaled)" if row["scaled"] else ""), va="center", fontsize=8)
    axes.set_xscale("log")
    totals = [r["total_s"] for r in rows]
    axes.set_xlim(min(totals) / 4, max(totals) * 8)  # a base below the shortest bar, room for the labels
    axes.invert_yaxis()
    epochs = rows[0]["target_epochs"]
    axes.set_xlabel(f"time of {epochs} training epochs, batch {rows[0]['batch']} (s, log scale; median of repeats)")
    axes.set_title("Implementations: time and speedup over CPU tiled on 1 thread\n" + machine_title(results),
                   fontsize=9)
    return figure


def draw_scaling(plt, results):
    summaries = summary.all_scaling(results)
    if not summaries:
        return None
    figure, (time_axes, speedup_axes, efficiency_axes) = plt.subplots(1, 3, figsize=(15, 4.8))
    top = max(p["workers"] for s in summaries for p in s["points"])
    for s in summaries:
        workers = [p["workers"] for p in s["points"]]
        (line,) = time_axes.plot(workers, [p["time_s"] for p in s["points"]], marker="o", label=s["label"])
        color = line.get_color()
        speedup_axes.plot(workers, [p["speedup"] for p in s["points"]], marker="o", color=color,
                          label=f"{s['label']}, measured")
        efficiency_axes.plot(workers, [p["efficiency"] for p in s["points"]], marker="o", color=color,
                             label=s["label"])
        if s["fit"]:
            curve = [1 + i * (top - 1) / 100 for i in range(101)]
            speedup_axes.plot(curve, [s["fit"].speedup(p) for p in curve], linestyle="--", color=color,
                              label=f"Amdahl fit, s = {s['fit'].serial:.3f}")
    speedup_axes.plot([1, top], [1, top], color="grey", linestyle=":", label="ideal")
    for axes, label in ((time_axes, "median epoch (s)"), (speedup_axes, "speedup over 1 worker"),
                        (efficiency_axes, "efficiency (speedup / workers)")):
        axes.set_xlabel("workers (OpenMP threads or MPI ranks)")
        axes.set_ylabel(label)
        axes.set_xticks(sorted({p["workers"] for s in summaries for p in s["points"]}))
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    efficiency_axes.axhline(1, color="grey", linestyle=":")
    efficiency_axes.set_ylim(bottom=0)
    time_axes.set_ylim(bottom=0)
    figure.suptitle(f"Scaling, batch {results['threads' if 'threads' in results else 'processes']['batch']}: "
                    + machine_title(results), fontsize=9)
    return figure


def draw_batch(plt, results):
    rows = summary.batch_rows(results["batch"]) if "batch" in results else []
    if not rows:
        return None
    figure, all_axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for device in ("cpu", "gpu"):
        points = [r for r in rows if r["device"] == device]
        if not points:
            continue
        batches = [r["batch"] for r in points]
        for axes, key, scale in zip(all_axes, ("epoch_s", "images_per_s", "accuracy"), (1, 1, 100)):
            axes.plot(batches, [r[key] * scale for r in points], marker="o", label=device.upper())
    labels = ("median epoch (s)", "images/s (training)", f"test accuracy after {rows[0]['epochs']} epochs (%)")
    for axes, label in zip(all_axes, labels):
        axes.set_xscale("log", base=2)
        integer_ticks(axes, [r["batch"] for r in rows])
        axes.set_xlabel("batch size (learning rate: mlp_train's default for each)")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    all_axes[0].set_yscale("log")
    all_axes[1].set_yscale("log")
    figure.suptitle(f"Batch size, --impl {results['batch']['impl']}: " + machine_title(results), fontsize=9)
    return figure


def draw_transfers(plt, results):
    section = results.get("transfers") or {}
    if "cases" not in section:
        return None
    rows = [r for r in summary.transfer_rows(section) if r["measured"]]
    batches = list(dict.fromkeys(r["batch"] for r in rows))
    if not batches:
        return None
    figure, all_axes = plt.subplots(1, len(batches), figsize=(4.5 * len(batches), 4.5), squeeze=False)
    for axes, batch in zip(all_axes[0], batches):
        points = sorted((r for r in rows if r["batch"] == batch), key=lambda r: PLACEMENT_ORDER.index(r["placement"]))
        names = [r["placement"] for r in points]
        bottom = [0.0] * len(points)
        for key, label, color in (("h2d_ms", "h2d", "tab:red"), ("compute_ms", "compute", "tab:blue"),
                                  ("d2h_ms", "d2h", "tab:green")):
            values = [r[key] for r in points]
            axes.bar(names, values, bottom=bottom, label=label, color=color)
            bottom = [b + v for b, v in zip(bottom, values)]
        axes.set_title(f"batch {batch}")
        axes.set_ylabel("ms per batch (GPU events, --graph off)")
        axes.legend(fontsize=8)
    figure.suptitle("Where a GPU step's time goes, by where batches come from: " + machine_title(results),
                    fontsize=9)
    return figure


def draw_ladder(plt, results):
    section = results.get("ladder") or {}
    devices = [d for d in ("cpu", "gpu") if summary.ladder_series(section.get(d))]
    if not devices:
        return None
    figure, all_axes = plt.subplots(1, len(devices), figsize=(7.5 * len(devices), 5), squeeze=False)
    for axes, device in zip(all_axes[0], devices):
        for impl, points in summary.ladder_series(section[device]).items():
            library = summary.is_library(impl)
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=impl,
                      linewidth=2.5 if library else 1.2, linestyle="--" if library else "-")
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        integer_ticks(axes, [p[0] for points in summary.ladder_series(section[device]).values() for p in points])
        axes.set_xlabel("square GEMM size n (n x n x n)")
        axes.set_ylabel("GFLOP/s (median of mlp_bench's repeats)")
        threads = f", {section.get('cpu_threads')} threads" if device == "cpu" else ""
        axes.set_title(f"GEMM on the {device.upper()}{threads}")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7, ncol=2)
    figure.suptitle("The kernel ladder against the library (dashed): " + machine_title(results), fontsize=9)
    return figure
