"""A run's parts in three formats, on the same rows: write and read times per part, and size.

    python -m tests.benchmarks.part_formats --run DIR [--parts 40] [--rounds 5]

The rows of the finished run ``DIR`` (its ``per_query.parquet``, in order) are cut into parts of 128 rows (a
batch of 64 queries under two configs, as the replay writes them), and each part is written and read back as
Parquet (lz4, no column statistics: the parts before), as an Arrow IPC file without compression, and as an
Arrow IPC file with lz4 (:mod:`rag_eval.rundir.parts` as it is). The formats alternate within each round;
prints, per format, the medians over the rounds of the mean milliseconds a part takes to be written, to be
read whole, and to be read for five columns (the summary reads a few columns at a time), and the mean size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.rundir import parts
from rag_eval.rundir.rows import SCHEMA

ROWS = 128
FIVE = pa.schema([SCHEMA.field(c) for c in ("query_id", "config", "member_chunks", "relevant_chunks", "judged")])


def _parquet_write(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="lz4", write_statistics=False)


def _parquet_read(path: Path, schema: pa.Schema) -> pa.Table:
    return pq.read_table(path, schema=schema, columns=schema.names)


def _arrow_write(compression: str | None) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        parts.write(table, path, compression)

    return write


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a finished run directory")
    parser.add_argument("--parts", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    table = pq.read_table(Path(args.run) / "per_query.parquet").select(SCHEMA.names).cast(SCHEMA)
    slices = [table.slice(start, ROWS) for start in range(0, min(table.num_rows, ROWS * args.parts), ROWS)]
    formats: dict[str, tuple[Callable[[pa.Table, Path], None], Callable[[Path, pa.Schema], pa.Table]]] = {
        "parquet-lz4": (_parquet_write, _parquet_read),
        "arrow": (_arrow_write(None), parts.read),
        "arrow-lz4": (_arrow_write("lz4"), parts.read),
    }
    spent: dict[str, dict[str, list[float]]] = {f: {"write": [], "read": [], "read5": []} for f in formats}
    sizes: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="part-formats-") as tmp:
        for _ in range(args.rounds):
            for name, (write, read) in formats.items():
                paths = [Path(tmp) / f"{name}-{i}" for i in range(len(slices))]
                started = time.perf_counter()
                for part, path in zip(slices, paths, strict=True):
                    write(part, path)
                spent[name]["write"].append((time.perf_counter() - started) / len(slices))
                for key, schema in (("read", SCHEMA), ("read5", FIVE)):
                    started = time.perf_counter()
                    for path in paths:
                        read(path, schema)
                    spent[name][key].append((time.perf_counter() - started) / len(slices))
                sizes[name] = sum(path.stat().st_size for path in paths) / len(paths)
    line = {
        name: {**{k: round(statistics.median(v) * 1e3, 3) for k, v in times.items()}, "kb": round(sizes[name] / 1e3, 1)}
        for name, times in spent.items()
    }
    print(json.dumps({"parts": len(slices), "rows": ROWS, "rounds": args.rounds, "ms_and_kb": line}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
