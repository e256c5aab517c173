"""REPORT.md of tools/study/study.py: the machine, the method, then one section per measurement with
its table, its figure and sentences generated from the figures (every number in the text is
computed from results.json; no claim is typed in). Standard library only.
"""
import study_summary as summary
from study_summary import number

SECTION_TITLES = {
    "implementations": "1. Implementations side by side",
    "threads": "2. OpenMP thread scaling",
    "processes": "3. Process scaling under MPI",
    "batch": "4. Batch size",
    "transfers": "5. Transfers: where a GPU step's batches come from",
    "ladder": "6. The kernel ladder: GEMM against the library",
}


def percent(fraction, digits=2):
    return "–" if fraction is None else f"{100 * fraction:.{digits}f}%"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def figure_line(figures, name, caption, results):
    if name in figures:
        return f"![{caption}]({figures[name]})\n"
    why = results["capabilities"]["matplotlib"].get("why", "nothing to draw")
    return f"(No figure: {why}; the table above has the figures.)\n"


def duration(seconds):
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


# ---------------------------------------------------------------- header

def header(results, figures):
    machine, capabilities, settings = results["machine"], results["capabilities"], results["settings"]
    cpu = machine["cpu"]
    layout = ""
    if cpu.get("sockets") and cpu.get("cores_per_socket"):
        layout = f" ({cpu['sockets']} socket x {cpu['cores_per_socket']} cores, {cpu['threads_per_core']} thread per core)"
    if capabilities["gpu"]["ok"]:
        gpu = "; ".join(machine["gpus"] + [f"mlp_train: {capabilities['gpu']['description']}"])
    else:
        gpu = "; ".join(machine["gpus"] + [f"none usable ({capabilities['gpu']['why']})"])
    rows = [
        ("CPU", f"{cpu['model']}: {results['cores']} cores usable{layout}, {machine['memory']} memory, {machine['os']}"),
        ("GPU", gpu),
        ("MPI", "mpirun -np N mlp_train works" if capabilities["mpi"]["ok"] else f"not built: {capabilities['mpi']['why']}"),
        ("PyTorch", peer_state(capabilities["pytorch"])),
        ("JAX", peer_state(capabilities["jax"])),
        ("mlp_train", f"{machine['mlp_train'].splitlines()[0]}, commit {machine['git']}"),
        ("plots", f"matplotlib {capabilities['matplotlib']['version']}" if capabilities["matplotlib"]["ok"]
         else f"none: {capabilities['matplotlib']['why']}"),
        ("load average (1 min)", load_text(machine, results["cores"])),
        ("study run time", f"{duration(results['durations']['total'])} ("
         + ", ".join(f"{name} {duration(s)}" for name, s in results["durations"].items() if name != "total") + ")"),
    ]
    gpu_words = capabilities["gpu"].get("description", "a GPU") if capabilities["gpu"]["ok"] else "no GPU"
    text = ["# The parallel-computing study of mlp_train\n",
            f"Measured on {machine['date']} by `{results.get('command', 'tools/study.sh')}` on one machine: "
            f"**{cpu['model']}, {results['cores']} cores, {gpu_words}**. Every figure below comes from that "
            "machine alone; `tools/study.sh` regenerates the tables and figures on the machine at hand.\n"]
    if settings["quick"]:
        train, test = settings["subset"]
        text.append(f"> **Quick mode (`--quick`)**: a smoke run for the test suite on the first {train} training "
                    f"and {test} test images of MNIST, {settings['epochs']} epochs instead of 10, "
                    f"{settings['repeats']} repeats. Its figures show that the study runs, not how fast anything is.\n")
    text += [f"> {note}\n" for note in results.get("notes", [])]  # said of the run after it (--replot)
    text.append(table(("", "this machine"), rows))
    text.append(method(settings))
    if results["errors"]:
        text.append("**Measurements that failed** (their rows are empty):\n\n"
                    + "".join(f"- {error}\n" for error in results["errors"]))
    return "\n".join(text)


def load_text(machine, cores):
    start, end = machine.get("load_at_start"), machine.get("load_at_end")
    if start is None or end is None:
        return "unknown"
    text = f"{start:.2f} when the study began, {end:.2f} when it ended"
    if max(start, end) > cores:
        text += f" (above the {cores} cores: other processes shared the machine during the study)"
    return text


def peer_state(capability):
    return capability["version"] if capability["ok"] else f"not run: {capability['why']}"


def method(settings):
    return (f"Method: every figure is the median of {settings['repeats']} repeats, taken in rounds (each round "
            "runs every case once), each a fresh process. Times are wall-clock: mlp_train's per-epoch training "
            "pass (`time_s` of `--json`, the monotonic clock, with the epoch's metrics read back), which "
            "leaves out loading the data and the test pass; \"process wall\" is the whole process, measured "
            "around it. Model 784-256-10, SGD with momentum 0.9, seed 42, mlp_train's default learning rate "
            "for each batch size (0.02 at batch 64, scaled with the batch, at most 0.2).\n")


# ---------------------------------------------------------------- 1. implementations

def section_implementations(results, figures):
    rows, baseline = summary.implementation_rows(results["implementations"])
    target = rows[0]["target_epochs"] if rows else results["settings"]["epochs"]
    body = [table(
        ("implementation", "workers", "epochs run", f"{target} epochs (s)", "median epoch (s)", "process wall (s)",
         "test accuracy", "speedup"),
        [implementation_cells(row) for row in rows])]
    body.append(figure_line(figures, "implementations", "time of each implementation", results))
    body.append(implementation_text(rows, baseline, results))
    return "\n".join(body)


def implementation_cells(row):
    label = row["label"] + (" (baseline)" if row["baseline"] else "")
    if not row["measured"]:
        return (label, row["workers"], row["epochs_run"], "failed", "", "", "", "")
    approx = "≈ " if row["scaled"] else ""
    return (label, row["workers"], row["epochs_run"], approx + number(row["total_s"]), number(row["epoch_s"]),
            number(row["wall_s"]), percent(row["accuracy"]), f"{number(row.get('speedup'))}x")


def implementation_text(rows, baseline, results):
    measured = [r for r in rows if r["measured"]]
    if not measured:
        return "No implementation could be measured.\n"
    lines = []
    batch = measured[0]["batch"] if "batch" in measured[0] else results["settings"]["batch"]
    target = measured[0]["target_epochs"]
    if baseline:
        lines.append(f"Batch {batch}. The sequential baseline is {baseline['label']}: {number(baseline['total_s'])} s "
                     f"for {target} epochs; speedup is its time over a row's.")
    fastest = min(measured, key=lambda r: r["total_s"])
    slowest = max(measured, key=lambda r: r["total_s"])
    lines.append(f"Fastest: {fastest['label']} ({fastest['workers']}), {number(fastest['total_s'])} s, "
                 f"{number(fastest.get('speedup'))}x the baseline. Slowest: {slowest['label']} "
                 f"({slowest['workers']}), {number(slowest['total_s'])} s, {number(slowest.get('speedup'))}x.")
    full = [r for r in measured if not r.get("peer") and not r["scaled"]]
    if full:
        low, high = min(r["accuracy"] for r in full), max(r["accuracy"] for r in full)
        lines.append(f"Test accuracy after {target} epochs ranges from {percent(low)} to {percent(high)} over "
                     f"the mlp_train rows that trained all {target} epochs.")
    for row in measured:
        if row["scaled"] and not row.get("peer"):
            lines.append(f"{row['label']} trained {row['epochs_run']} epoch(s) per repeat (≈: its time is scaled to "
                         f"{target} epochs, its accuracy is after {row['epochs_run']} epoch(s)).")
    if any(r.get("peer") for r in measured):
        lines.append(f"Peer rows (≈): the peer script reports the median epoch after a warm-up epoch, so their "
                     f"{target}-epoch time is {target} times it; they use mlp_train's learning rate at this "
                     f"batch, and their framework's own initialization.")
    absent = [f"{name}: {results['capabilities'][key]['why']}" for key, name in (("pytorch", "PyTorch"), ("jax", "JAX"))
              if not results["capabilities"][key]["ok"]]
    if absent:
        lines.append("Peers not run: " + "; ".join(absent) + ".")
    if not results["capabilities"]["gpu"]["ok"]:
        lines.append("GPU rows: not measured (no usable GPU).")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- 2. and 3. scaling

def scaling_table(series):
    unit = "threads" if series["kind"] == "threads" else "ranks"
    return table((unit, "median epoch (s)", "speedup", "efficiency", "repeats"),
                 [(p["workers"], number(p["time_s"]), f"{number(p['speedup'])}x", percent(p["efficiency"], 0),
                   p["repeats"]) for p in series["points"]])


def fit_text(series):
    fit = series["fit"]
    if fit is None:
        return "No Amdahl fit: the 1-worker time or a second worker count is missing."
    if fit.low is None:
        interval = "no interval: one repeat per point leaves nothing to resample"
    else:
        interval = (f"± {number((fit.high - fit.low) / 2, 2)} (95% bootstrap interval {fit.low:.3f}–{fit.high:.3f} "
                    f"over the repeats)")
    text = (f"Amdahl fit (least squares of T(p) = T1·(s + (1−s)/p) over every repeat): serial fraction "
            f"s = {fit.serial:.3f} {interval}; T1 = {number(fit.t1)} s; RMS residual {percent(fit.rms_relative, 1)} "
            f"of T1.")
    if fit.serial > 0:
        text += f" The fitted curve levels off at 1/s = {number(1 / fit.serial)}x."
    if fit.at_bound:
        text += " The unconstrained fit fell outside [0, 1]; s is held at the bound."
    if len(series["points"]) == 2:
        text += (" With two worker counts the fit has as many parameters as points: it passes through the "
                 "mean of each, and its interval reflects only the spread of the repeats.")
    return text


def scaling_sentence(series):
    last = series["points"][-1]
    if last["workers"] == 1 or last["speedup"] is None:
        return f"{series['label']}: only one worker count measured."
    unit = "threads" if series["kind"] == "threads" else "ranks"
    return (f"{series['label']} at {last['workers']} {unit} is {number(last['speedup'])}x its 1-worker time "
            f"(efficiency {percent(last['efficiency'], 0)}).")


def scaling_body(section, results):
    body = [f"Batch {section['batch']}, {section['epochs']} epochs per run; a run's figure is its median epoch "
            "after the first.\n"]
    for series in section["series"]:
        summary_ = summary.scaling_summary(series)
        body.append(f"**{summary_['label']}**\n")
        body.append(scaling_table(summary_))
        body.append(scaling_sentence(summary_) + " " + fit_text(summary_) + "\n")
    return body


def section_threads(results, figures):
    section = results["threads"]
    body = scaling_body(section, results)
    body.append(figure_line(figures, "scaling", "time, speedup against Amdahl and ideal, efficiency", results))
    body.append("naive and tiled run mlp_train's OpenMP loops; blas's threads are OpenBLAS's own"
                + (f" ({blas_description(results)})" if blas_description(results) else "") + ".\n")
    return "\n".join(body)


def blas_description(results):
    """mlp_train's description of its CPU blas backend (OpenBLAS version, build, kernels), if run."""
    for case in (results.get("implementations") or {}).get("cases", []):
        if case["device"] == "cpu" and case["impl"] == "blas" and case["runs"]:
            return case["runs"][0]["description"]
    return None


def section_processes(results, figures):
    section = results["processes"]
    if "skipped" in section:
        return f"Not measured: MPI not built ({section['skipped']}).\n"
    body = scaling_body(section, results)
    threads = {s["impl"]: summary.scaling_summary(s) for s in (results.get("threads") or {}).get("series", [])}
    for series in section["series"]:
        ranks = summary.scaling_summary(series)
        beside = threads.get(series["impl"])
        if beside and ranks["points"] and beside["points"]:
            a, b = ranks["points"][-1], beside["points"][-1]
            if a["workers"] == b["workers"]:
                body.append(f"At {a['workers']} workers, {series['impl']} reaches {number(a['speedup'])}x with MPI "
                            f"ranks and {number(b['speedup'])}x with OpenMP threads (the speedup panel of the "
                            "figure in section 2 draws both).\n")
    return "\n".join(body)


# ---------------------------------------------------------------- 4. batch size

def section_batch(results, figures):
    section = results["batch"]
    rows = summary.batch_rows(section)
    if not rows:
        return "No batch size could be measured.\n"
    epochs = rows[0]["epochs"]
    body = [f"`--impl {section['impl']}` (CPU on {section['threads']} threads). Each point runs once per round: "
            f"{epochs} epochs in the first round, whose test accuracy after epoch {epochs} is the accuracy figure, "
            f"{section['timing_epochs']} epochs in the others; the time is the median over the runs of each run's "
            "median epoch after the first.\n",
            table(("device", "batch", "learning rate", "median epoch (s)", "images/s", f"test accuracy, {epochs} epochs",
                   "runs"),
                  [(r["device"].upper(), r["batch"], number(r["lr"]), number(r["epoch_s"]), number(r["images_per_s"]),
                    percent(r["accuracy"]), r["runs"]) for r in rows])]
    body.append(figure_line(figures, "batch", "epoch time, images/s and accuracy against the batch size", results))
    for device in ("cpu", "gpu"):
        points = [r for r in rows if r["device"] == device]
        if len(points) > 1:
            body.append(batch_sentence(device, points, epochs))
    if not results["capabilities"]["gpu"]["ok"]:
        body.append("GPU: not measured (no usable GPU).\n")
    return "\n".join(body)


def batch_sentence(device, points, epochs):
    fastest = max(points, key=lambda r: r["images_per_s"])
    slowest = min(points, key=lambda r: r["images_per_s"])
    best = max(points, key=lambda r: r["accuracy"])
    worst = min(points, key=lambda r: r["accuracy"])
    text = (f"{device.upper()}: throughput is highest at batch {fastest['batch']} ({number(fastest['images_per_s'])} "
            f"images/s) and lowest at batch {slowest['batch']} ({number(slowest['images_per_s'])}), "
            f"{number(fastest['images_per_s'] / slowest['images_per_s'])}x apart. ")
    if percent(best["accuracy"]) == percent(worst["accuracy"]):
        return text + f"Accuracy after {epochs} epochs is {percent(best['accuracy'])} at every batch size.\n"
    return text + (f"Accuracy after {epochs} epochs is highest at batch {best['batch']} ({percent(best['accuracy'])}) "
                   f"and lowest at batch {worst['batch']} ({percent(worst['accuracy'])}).\n")


# ---------------------------------------------------------------- 5. transfers

def section_transfers(results, figures):
    section = results["transfers"]
    if "skipped" in section:
        return f"Not measured: {section['skipped']}. This section needs `mlp_train --device gpu` to work.\n"
    rows = summary.transfer_rows(section)
    body = [f"`--impl {section['impl']} --graph off --profile`, {section['epochs']} epochs per run (the graph is "
            "off so that each phase is timed by CUDA events; the epoch times are not those of the default). Per "
            "batch: h2d (the batch gathered on the device, or gathered on the host and copied), compute (forward, "
            "backward, update), d2h (the epoch's two sums, spread over its batches); medians over the epochs after "
            "the first of every repeat.\n",
            table(("batch", "batches from", "h2d (ms/batch)", "compute (ms/batch)", "d2h (ms/batch)", "median epoch (s)"),
                  [(r["batch"], r["placement"], number(r.get("h2d_ms")), number(r.get("compute_ms")),
                    number(r.get("d2h_ms")), number(r.get("epoch_s"))) for r in rows])]
    body.append(figure_line(figures, "transfers", "h2d / compute / d2h per batch", results))
    for batch in dict.fromkeys(r["batch"] for r in rows):
        body.append(transfer_sentence(batch, {r["placement"]: r for r in rows if r["batch"] == batch and r["measured"]}))
    return "\n".join(body)


def transfer_sentence(batch, by_placement):
    resident, pageable = by_placement.get("resident"), by_placement.get("pageable")
    pinned, overlapped = by_placement.get("pinned"), by_placement.get("overlapped")
    parts = []
    if resident and pageable:
        parts.append(f"copies from pageable memory take {number(pageable['h2d_ms'])} ms of h2d per batch against "
                     f"{number(resident['h2d_ms'])} ms with the data resident, and the epoch "
                     f"{number(pageable['epoch_s'])} s against {number(resident['epoch_s'])} s")
    if pinned and pageable:
        parts.append(f"pinned memory gives {number(pinned['h2d_ms'])} ms per batch "
                     f"(epoch {number(pinned['epoch_s'])} s)")
    if overlapped:
        parts.append(f"overlapped copies {number(overlapped['h2d_ms'])} ms (epoch {number(overlapped['epoch_s'])} s)")
    if not parts:
        return f"Batch {batch}: too few placements measured to compare.\n"
    return f"Batch {batch}: " + "; ".join(parts) + ".\n"


# ---------------------------------------------------------------- 6. the ladder

def section_ladder(results, figures):
    section = results["ladder"]
    body = ["`mlp_bench gemm` on square sizes: each case verified against double precision, then timed; "
            "GFLOP/s of the median time. Libraries: `blas` (OpenBLAS on the CPU, cuBLAS FP32 on the GPU), "
            "`blas_tf32` and `blas_bf16` for the tensor-core rungs of the same precision.\n"]
    for device in ("cpu", "gpu"):
        series = summary.ladder_series(section.get(device))
        if not series:
            why = section.get(f"{device}_skipped") or "mlp_bench failed (see the failures above)"
            body.append(f"**{device.upper()}**: not measured ({why}).\n")
            continue
        threads = f", {section.get('cpu_threads')} threads" if device == "cpu" else ""
        body.append(f"**{device.upper()}{threads}** (GFLOP/s)\n")
        body.append(ladder_table(series))
        body.append(ladder_sentence(series) + "\n")
    body.append(figure_line(figures, "ladder", "GEMM GFLOP/s over size, each kernel and the library", results))
    return "\n".join(body)


def ladder_table(series):
    sizes = sorted({size for points in series.values() for size, _, _ in points})
    rows = []
    for impl, points in series.items():
        rate = {size: r for size, r, _ in points}
        largest = points[-1]
        rows.append([impl] + [number(rate.get(size)) for size in sizes]
                    + [f"{number(largest[2])} at n={largest[0]}" if largest[2] is not None else "–"])
    return table(["kernel"] + [f"n={s}" for s in sizes] + ["vs library"], rows)


def ladder_sentence(series):
    sentences = []
    for impl, points in series.items():
        if summary.is_library(impl):
            continue
        size, rate, versus = points[-1]
        best = max(points, key=lambda p: p[2] or 0)
        text = f"{impl}: {number(rate)} GFLOP/s at n={size}"
        if versus is not None:
            text += f", {percent(versus, 0)} of the library's rate there"
            if best[2] and best[2] > 1:
                text += f"; faster than the library at n={', '.join(str(p[0]) for p in points if p[2] and p[2] > 1)}"
        sentences.append(text)
    return ". ".join(sentences) + "." if sentences else ""


# ---------------------------------------------------------------- the whole report

def render(results, figures):
    parts = [header(results, figures)]
    renderers = {"implementations": section_implementations, "threads": section_threads,
                 "processes": section_processes, "batch": section_batch, "transfers": section_transfers,
                 "ladder": section_ladder}
    for name, title in SECTION_TITLES.items():
        parts.append(f"## {title}\n")
        parts.append(renderers[name](results, figures) if name in results else "Not measured in this run (--only).\n")
    return "\n".join(parts)
