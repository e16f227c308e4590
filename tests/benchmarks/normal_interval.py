"""The normal interval of many units against the percentile interval, on a query log's real per-query pairs.

    python -m tests.benchmarks.normal_interval RUN_DIR [--samples 200] [--units 20000]

RUN_DIR is a run with a ``[traffic]`` log of at least ``--units`` queries (``tests.benchmarks.traffic_scale``
writes one) and the configs ``legacy-merge`` and ``evidence``. For the payload's character p50 and p95, the
post-process latency p95 and a share (duplicates dropped by key per hit), it prints

- on the whole log: both intervals from the same 1,999 resamples and how far their ends lie apart, as a
  share of the percentile interval's width;
- coverage: ``--samples`` draws of ``--units`` pairs from the log (the log as the population, its own
  difference the truth), the share of draws whose interval covers the truth, for each method from the same
  999 resamples.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from rag_eval.compare import bootstrap

COLUMNS = ["query_id", "config", "origin", "payload_chars", "postprocess_us", "n_hits", "n_dedup"]


def _tests(run: Path) -> dict[str, tuple[str, float, np.ndarray, np.ndarray]]:
    rows = pq.read_table(run / "per_query.parquet", columns=COLUMNS).to_pandas()
    rows = rows[rows.origin == "traffic"]
    a = rows[rows.config == "legacy-merge"].sort_values("query_id")
    b = rows[rows.config == "evidence"].sort_values("query_id")
    if not (a.query_id.to_numpy() == b.query_id.to_numpy()).all():
        raise SystemExit("the two configs' traffic queries differ")

    def share(side: object) -> np.ndarray:
        return np.column_stack([side.n_dedup, side.n_hits]).astype(float)  # type: ignore[attr-defined]

    return {
        "payload chars p50": ("percentile", 50.0, a.payload_chars.to_numpy(float), b.payload_chars.to_numpy(float)),
        "payload chars p95": ("percentile", 95.0, a.payload_chars.to_numpy(float), b.payload_chars.to_numpy(float)),
        "post-process p95": ("latency", 95.0, a.postprocess_us.to_numpy(float), b.postprocess_us.to_numpy(float)),
        "share kept by dedup": ("rate", 50.0, share(a), share(b)),
    }


def _truth(kind: str, q: float, x: np.ndarray, y: np.ndarray) -> float:
    if kind == "rate":
        return float(y[:, 0].sum() / y[:, 1].sum() - x[:, 0].sum() / x[:, 1].sum())
    return float(np.percentile(y, q) - np.percentile(x, q))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--units", type=int, default=bootstrap.NORMAL_MIN_UNITS)
    args = parser.parse_args()
    for name, (kind, q, x, y) in _tests(args.run_dir).items():
        test = [bootstrap.BootTest(kind=kind, baseline=x, candidate=y, percentile=q)]  # type: ignore[arg-type]
        (box,) = bootstrap.intervals(test, resamples=1999, confidence=0.95, rng=np.random.default_rng(1))
        dist = box.distributions[0]
        lo, hi = np.quantile(dist, 0.025), np.quantile(dist, 0.975)
        width = hi - lo
        apart = (abs(box.lows[0] - lo) / width, abs(box.highs[0] - hi) / width)
        print(f"{name}, {len(x):,} pairs: normal [{box.lows[0]:.4g}, {box.highs[0]:.4g}], percentile "
              f"[{lo:.4g}, {hi:.4g}]: ends {apart[0]:.1%} and {apart[1]:.1%} of the width apart",
              flush=True)  # fmt: skip
        truth = _truth(kind, q, x, y)
        rng = np.random.default_rng(7)
        covered = {"normal": 0, "percentile": 0}
        for r in range(args.samples):
            idx = rng.integers(0, len(x), args.units)
            drawn = [bootstrap.BootTest(kind=kind, baseline=x[idx], candidate=y[idx], percentile=q)]  # type: ignore[arg-type]
            (b,) = bootstrap.intervals(drawn, resamples=999, confidence=0.95, rng=np.random.default_rng(r))
            plo, phi = np.quantile(b.distributions[0], 0.025), np.quantile(b.distributions[0], 0.975)
            covered["percentile"] += int(plo <= truth <= phi)
            covered["normal"] += int(b.lows[0] <= truth <= b.highs[0]) if b.normal else int(plo <= truth <= phi)
        print(f"  coverage of {truth:.4g} over {args.samples} draws of {args.units:,}: normal "
              f"{covered['normal'] / args.samples:.3f}, percentile {covered['percentile'] / args.samples:.3f}",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
