"""Time per request of the `Session` on every member of the session family, one member at a
time (run it on an otherwise idle machine): the median of the per-request times that
`benches/session.rs` writes (`ms`: compaction, checkpoint save, ledger, pointers), per member,
and the min / median / max of those medians. BENCHMARKS.md, "Time per request, idle".

    cargo build --release -p compaction-benches --example session
    python3 benches/peers/request_times.py [BUDGET] [family|unseen|flat] [SESSION_BINARY]

`flat`: how the time per request grows with a session's length, two ways, per shape (seed
and `keep_recent` of the family's 300- and 2,000-turn coding members):
- across sessions: the session generated at 300 turns against the one generated at 2,000, the
  ratio of their medians. The two differ in more than their length: the generator gives the
  longer session a longer plan from its first turn (a step per 25 turns: 13 against 81), and
  the plan is state the window sends at every request;
- within one session: the 2,000-turn session's requests during its last 300 turns against those
  during its first 300 (each request's `turn`): the same plan, 1,700 turns of history later
  (and a decision more per 25 turns).
Each session runs `RUNS` (5) times and each part keeps its lowest median: a shared VM's noise
only ever adds time. The 2,000-turn session's lowest median per 200 turns is printed too. One
more run of the 2,000-turn session (`SESSION_CHECKPOINT_BYTES=1`) gives what does not vary
between runs: the mean size of the checkpoint each request saves, in its first 300 turns and
its last 300, whole and its planner memory (the part that grows with the history).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from family import members  # noqa: E402
from trim_messages import TARGET  # noqa: E402


def main() -> None:
    budget = int(sys.argv[1]) if len(sys.argv) > 1 else 64_000
    which = sys.argv[2] if len(sys.argv) > 2 else "family"
    binary = sys.argv[3] if len(sys.argv) > 3 else str(TARGET / "release" / "examples" / "session")
    if which == "flat":
        flat(budget, binary)
        return
    medians = {}
    with tempfile.TemporaryDirectory() as out:
        for member in members(which):
            subprocess.run([binary, member, str(budget), out], capture_output=True, check=True)
            path = Path(out) / f"compaction-{member}-{budget}.jsonl"
            ms = [r["ms"] for r in map(json.loads, path.read_text().splitlines())
                  if "request" in r and "ms" in r]
            medians[member] = statistics.median(ms)
            print(f"{member}: {len(ms)} requests, median {medians[member]:.2f} ms", flush=True)
    values = sorted(medians.values())
    print(f"min / median / max of the medians: {values[0]:.2f} / "
          f"{statistics.median(values):.2f} / {values[-1]:.2f} ms")


def request_rows(binary: str, member: str, budget: int, out: str, env=None) -> list[dict]:
    """The rows of the requests of one run of `member`."""
    subprocess.run([binary, member, str(budget), out], capture_output=True, check=True,
                   env=None if env is None else {**os.environ, **env})
    path = Path(out) / f"compaction-{member}-{budget}.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines())
            if "request" in r and "ms" in r]


def request_ms(binary: str, member: str, budget: int, out: str) -> list[tuple[int, float]]:
    """Each request's user turn and time, from one run of `member`."""
    return [(r["turn"], r["ms"]) for r in request_rows(binary, member, budget, out)]


def first_and_last(rows: list, turn) -> tuple[list, list]:
    """The rows of a 2,000-turn session's first 300 turns and of its last 300 (`turn(row)`)."""
    return ([r for r in rows if turn(r) <= 300], [r for r in rows if turn(r) > 2000 - 300])


def checkpoint_growth(binary: str, member: str, budget: int, out: str) -> str:
    """The mean checkpoint bytes of `member`'s requests in its first and last 300 turns."""
    rows = request_rows(binary, member, budget, out, {"SESSION_CHECKPOINT_BYTES": "1"})
    first, last = first_and_last(rows, lambda r: r["turn"])
    parts = []
    for part in ["whole", "planner_memory"]:
        before, after = (statistics.mean(r["checkpoint_bytes"][part] for r in rs)
                         for rs in (first, last))
        parts.append(f"{part} {before:,.0f} -> {after:,.0f} bytes ({after / before:.2f}x)")
    return ", ".join(parts)


# Runs of each session in `flat`. This VM's speed drifts over tens of seconds (five runs of one
# binary on coding-2000-s2-k3, 2026-12-04: its turns 201-400 took a median 1.18 ms in one run
# and 1.97 ms in another), so a part of a session is taken at its lowest over several runs.
RUNS = 5


def flat(budget: int, binary: str) -> None:
    across, within = [], []
    with tempfile.TemporaryDirectory() as out:
        for shape in ["s1-k2", "s2-k3", "s3-k1", "s1-k1"]:
            short = min(statistics.median(ms for _, ms in request_ms(
                binary, f"coding-300-{shape}", budget, out)) for _ in range(RUNS))
            whole, first, last, buckets = [], [], [], []
            for _ in range(RUNS):
                rows = request_ms(binary, f"coding-2000-{shape}", budget, out)
                whole.append(statistics.median(ms for _, ms in rows))
                start, end = first_and_last(rows, lambda r: r[0])
                first.append(statistics.median(ms for _, ms in start))
                last.append(statistics.median(ms for _, ms in end))
                buckets.append([statistics.median(ms for turn, ms in rows
                                                  if b * 200 < max(turn, 1) <= (b + 1) * 200)
                                for b in range(10)])
            long = min(whole)
            across.append(long / short)
            within.append(min(last) / min(first))
            lowest = " ".join(f"{min(run[b] for run in buckets):.2f}" for b in range(10))
            print(f"coding {shape}: across, 300 turns {short:.2f} ms, 2,000 turns {long:.2f} ms: "
                  f"{long / short:.2f}x; within the 2,000-turn session, its first 300 turns "
                  f"{min(first):.2f} ms, its last 300 {min(last):.2f} ms: "
                  f"{min(last) / min(first):.2f}x (by 200 turns: {lowest} ms); its checkpoints, "
                  f"{checkpoint_growth(binary, f'coding-2000-{shape}', budget, out)}",
                  flush=True)
    for name, ratios in [("across sessions", across), ("within a session", within)]:
        ratios.sort()
        print(f"min / median / max of the ratios, {name}: {ratios[0]:.2f} / "
              f"{statistics.median(ratios):.2f} / {ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
