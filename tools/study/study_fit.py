"""Statistics for tools/study/study.py, standard library only: medians, and Amdahl's law fitted to
measured times with a bootstrap confidence interval for the serial fraction.

Amdahl's law: T(p) = T1 * (s + (1 - s) / p) for p workers, serial fraction s in [0, 1]. Written
as T(p) = a + b / p with a = T1*s and b = T1*(1 - s), it is linear in (a, b), so the least-squares
fit over every measured (p, time) pair has a closed form; the constraint a, b >= 0 (s in [0, 1])
is honoured by also fitting with a = 0 and with b = 0 and keeping the best feasible candidate.
The interval for s comes from a bootstrap over the repeats: each worker count's repeated times
are resampled with replacement, the fit is redone, and the 2.5th and 97.5th percentiles of s are
the 95% interval.
"""
import random
import statistics
from dataclasses import dataclass


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


@dataclass
class AmdahlFit:
    t1: float              # fitted time on one worker
    serial: float          # fitted serial fraction s
    rms_relative: float    # root mean square of the residuals, as a fraction of t1
    at_bound: bool         # the unconstrained fit left [0, 1] and s sits on a bound
    low: float = None      # 95% bootstrap interval for s (None: no spread to resample)
    high: float = None

    def predict(self, workers):
        return self.t1 * (self.serial + (1 - self.serial) / workers)

    def speedup(self, workers):
        return 1 / (self.serial + (1 - self.serial) / workers)


def _sse(points, a, b):
    return sum((t - a - b / p) ** 2 for p, t in points)


def _candidates(points):
    """(a, b) for the unconstrained fit, the fit with a = 0 and the fit with b = 0."""
    xs = [1 / p for p, _ in points]
    ts = [t for _, t in points]
    n = len(points)
    mean_x, mean_t = sum(xs) / n, sum(ts) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx > 0:
        b = sum((x - mean_x) * (t - mean_t) for x, t in zip(xs, ts)) / sxx
        yield mean_t - b * mean_x, b
    yield 0.0, sum(x * t for x, t in zip(xs, ts)) / sum(x * x for x in xs)
    yield mean_t, 0.0


def fit_points(points):
    """Least-squares Amdahl fit to (workers, time) pairs, s kept in [0, 1]; None if fewer than
    two distinct worker counts."""
    if len({p for p, _ in points}) < 2:
        return None
    candidates = list(_candidates(points))
    feasible = [(a, b) for a, b in candidates if a >= 0 and b >= 0 and a + b > 0]
    a, b = min(feasible, key=lambda ab: _sse(points, *ab))
    t1 = a + b
    rms = (_sse(points, a, b) / len(points)) ** 0.5 / t1
    return AmdahlFit(t1=t1, serial=a / t1, rms_relative=rms, at_bound=(a, b) != candidates[0])


def fit_amdahl(times_by_workers, resamples=2000, seed=1):
    """The fit to {workers: [time of each repeat]} with its 95% bootstrap interval for s."""
    points = [(p, t) for p, times in times_by_workers.items() for t in times]
    fit = fit_points(points)
    if fit is None:
        return None
    if all(len(times) < 2 for times in times_by_workers.values()):
        return fit  # one repeat per point: nothing to resample
    generator = random.Random(seed)
    serials = []
    for _ in range(resamples):
        sample = [(p, generator.choice(times)) for p, times in times_by_workers.items() for _ in times]
        refit = fit_points(sample)
        if refit:
            serials.append(refit.serial)
    serials.sort()
    fit.low = serials[int(0.025 * (len(serials) - 1))]
    fit.high = serials[int(0.975 * (len(serials) - 1))]
    return fit


if __name__ == "__main__":  # a self-check: recovers a known serial fraction from noisy times
    noise = random.Random(7)
    truth = {p: [10 * (0.2 + 0.8 / p) * (1 + noise.gauss(0, 0.01)) for _ in range(5)] for p in (1, 2, 4, 8)}
    result = fit_amdahl(truth)
    assert abs(result.serial - 0.2) < 0.02 and result.low <= result.serial <= result.high, result
    assert abs(result.t1 - 10) < 0.3, result
    slower = fit_amdahl({1: [1.0, 1.01], 2: [1.3, 1.2]})  # two workers slower than one: s = 1
    assert slower.serial == 1.0 and slower.at_bound, slower
    faster = fit_amdahl({1: [4.0], 2: [1.5]})  # superlinear: s = 0, no interval from one repeat
    assert faster.serial == 0.0 and faster.low is None, faster
    print("study_fit: ok", result)
