#!/usr/bin/env python3
"""The session bench on a family of sessions, like for like, measured in money (issue 30).

Run from the repository root:

    python3 benches/peers/family.py                      # the family, budgets 8k to 128k
    python3 benches/peers/family.py --set unseen         # the unseen seeds, the same way
    python3 benches/peers/family.py --max-turns 300 --budgets 16000 64000   # scaled down
    python3 benches/peers/family.py --summarize FILE     # the distribution tables of a run

Every session of the family (`fixtures/src/family.rs`: coding, support and research sessions of
100 to 2,000 turns, keep_recent 1 to 3, several seeds) is played at every budget by four
policies, scored by `session.py`'s scorer (prefix reuse over the ceiling's):

- **Session**: this library's `Session` with its defaults (`benches/session.rs`);
- **trim_messages** and **SummarizationMiddleware**: LangChain's, as in `session.py`;
- **ceiling**: append only, every result verbatim.

**Like for like**: where the Session pages a new tool result on arrival (the first request that
holds the result holds an excerpt), the peers are given that excerpt in place of the result,
in their input, from the start. **Verbatim share**: of all tool-result bytes of the session,
the share whose first appearance in a policy's requests was the result itself.

**Money**: every policy's requests (JSONL) are priced by `benches/price.rs` with the library's
cache models (`compaction::cache`): Anthropic (breakpoints as `anthropic_request` places them,
minimum 1,024, writes 1.25x, reads 0.1x) and OpenAI (automatic from 1,024 tokens in 128-token
steps, cached input 0.1x). Billed input is in base input tokens. The ceiling is not priced:
its requests exceed the budget (it is a bound on reuse, not a policy one can send).

One JSON line per (session, budget, policy) goes to `OUT/family-SET.jsonl`; `--summarize`
prints min / median / max over the sessions per budget and policy, and the issue's goals.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session as peers  # noqa: E402
from session import (  # noqa: E402
    Counter, Score, Tokens, key_of, play_ceiling,
)
from trim_messages import ROOT, TARGET, ensure_venv  # noqa: E402

OUT = TARGET / "session-bench"
KINDS = ["coding", "support", "research"]
# fixtures/src/family.rs's LENGTHS: (turns, seed, keep_recent), seeds offset by 1,000 unseen.
LENGTHS = [(100, 1, 1), (100, 2, 2), (100, 3, 3), (300, 1, 2), (300, 2, 3), (300, 3, 1),
           (800, 1, 3), (2000, 1, 1)]
BUDGETS = [8_000, 16_000, 32_000, 64_000, 128_000]


def members(which: str) -> list[str]:
    offset = 1000 if which == "unseen" else 0
    return [f"{kind}-{turns}-s{seed + offset}-k{keep}"
            for kind in KINDS for (turns, seed, keep) in LENGTHS]


class Requests:
    """A policy's requests as JSONL, in `benches/session.rs`'s format, for the pricer."""

    def __init__(self, path: Path):
        self.file = path.open("w")
        self.ids: dict[str, int] = {}
        self.index = 0

    def sent(self, keys: list[str], stable: int) -> None:
        ids = []
        for key in keys:
            i = self.ids.get(key)
            if i is None:
                i = self.ids[key] = len(self.ids)
                self.file.write(f'{{"message":{i},"value":{key}}}\n')
            ids.append(i)
        self.file.write(json.dumps({"request": self.index, "ids": ids, "stable": stable}) + "\n")
        self.index += 1

    def close(self) -> None:
        self.file.close()


class Verbatim:
    """The share of tool-result bytes a policy's requests showed verbatim the first time."""

    def __init__(self, original: dict[str, str]):
        self.original = original
        self.total = sum(len(c.encode()) for c in original.values()) or 1
        self.first: dict[str, bool] = {}
        self.seen: set[str] = set()

    def see(self, keys: list[str]) -> None:
        for key in keys:
            if key in self.seen:
                continue
            self.seen.add(key)
            if '"role":"tool"' not in key:
                continue
            m = json.loads(key)
            call = m.get("tool_call_id")
            if call in self.original and call not in self.first:
                self.first[call] = m.get("content") == self.original[call]

    def share(self) -> float:
        kept = sum(len(self.original[c].encode()) for c, ok in self.first.items() if ok)
        return kept / self.total


def tool_results(session: dict) -> dict[str, str]:
    return {e["push"]["tool_call_id"]: e["push"]["content"] for e in session["events"]
            if "push" in e and e["push"]["role"] == "tool"}


def first_seen(path: Path) -> tuple[dict[str, str], list]:
    """Ours: each tool result's content the first time a request held it, and the requests
    (keys, stable, ms) or refusals (None, None, ms)."""
    values: dict[int, str] = {}
    first: dict[str, str] = {}
    requests = []
    with path.open() as f:
        for line in f:
            item = json.loads(line)
            if "message" in item:
                value = item["value"]
                values[item["message"]] = key_of(value)
                if value["role"] == "tool":
                    first.setdefault(value["tool_call_id"], value["content"])
            elif "refused" in item:
                requests.append((None, None, item["ms"]))
            else:
                keys = [values[i] for i in item["ids"]]
                requests.append((keys, item.get("stable"), item["ms"]))
    return first, requests


def with_state(session: dict) -> dict:
    """The session with the agent's state (task, rules, plan) at the end of its system prompt,
    as an agent without typed state would carry it: the `Session` sends the same fields in its
    window, so every policy pays for the same information (its changes reach every policy
    through the user messages that announce them)."""
    state = session.get("state")
    if not state:
        return session
    initial = [{**m, "content": f"{m['content']}\n\n{state}"} if m["role"] == "system" else m
               for m in session["initial"]]
    return {**session, "initial": initial}


def like_for_like(session: dict, first: dict[str, str]) -> tuple[dict, int]:
    """The session with every result ours paged on arrival replaced by ours' excerpt."""
    events, replaced = [], 0
    for event in session["events"]:
        push = event.get("push")
        if push and push["role"] == "tool":
            seen = first.get(push["tool_call_id"])
            if seen is not None and seen != push["content"]:
                event = {"push": {**push, "content": seen}}
                replaced += 1
        events.append(event)
    return {"initial": session["initial"], "events": events}, replaced


def play_trim(session, budget, counter, score, verbatim, out):
    """`session.py`'s trim_messages player, each request also seen by the verbatim share and
    written to the request file."""
    peers.play_trim(session, budget, counter, score, seen(verbatim, out))


def play_summarization(session, budget, counter, score, verbatim, out):
    """`session.py`'s SummarizationMiddleware player, the same way."""
    peers.play_summarization(session, budget, counter, score, seen(verbatim, out))


def seen(verbatim, out):
    def request(keys: list[str], stable: int) -> None:
        verbatim.see(keys)
        out.sent(keys, stable)
    return request


def price(paths: list[Path]) -> dict[str, dict]:
    binary = TARGET / "release" / "examples" / "price"
    out = subprocess.run([binary, *map(str, paths)], check=True, capture_output=True,
                         text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {Path(r["file"]).name: r for r in rows}


def money(row: dict) -> dict:
    a, o, after = row["anthropic"], row["openai"], row["anthropic_after_compaction"]
    return {
        "anthropic_billed": a["billed"], "openai_billed": o["billed"],
        "anthropic_read_share": a["read"] / max(a["tokens"], 1),
        "openai_read_share": o["read"] / max(o["tokens"], 1),
        "anthropic_after_compaction_read_share": after["read"] / max(after["tokens"], 1)
        if after["tokens"] else None,
    }


def measure(name: str, budgets: list[int], keep: bool, results: Path) -> None:
    """Every policy on one session at every budget: one row per (budget, policy), appended to
    `results` as each budget ends (a run stopped early keeps what it measured)."""
    binary = TARGET / "release" / "examples" / "session"
    tokens = Tokens()
    rows = []
    for n, budget in enumerate(budgets):
        started = time.time()
        subprocess.run([binary, name, str(budget), str(OUT), *(["--export"] if n == 0 else [])],
                       check=True, capture_output=True, text=True)
        ours_s = time.time() - started
        session = with_state(json.loads((OUT / f"session-{name}.json").read_text()))
        original = tool_results(session)
        ours_path = OUT / f"compaction-{name}-{budget}.jsonl"
        first, requests = first_seen(ours_path)
        peers_session, replaced = like_for_like(session, first)
        base = {"session": name, "budget": budget, "paged_on_arrival": replaced,
                "results": len(original)}

        ceiling = Score(tokens, budget, ceiling=True)
        play_ceiling(session, ceiling)
        rows.append({**base, "policy": "ceiling", "prefix_reuse": ceiling.reuse(),
                     "of_ceiling": 1.0, "requests": len(ceiling.ms), "refused": 0,
                     "over_budget": 0, "tokens_sent": ceiling.capped,
                     "mean_tokens": ceiling.capped / max(len(ceiling.sizes), 1),
                     "verbatim_share": 1.0})

        def row(policy, score, verbatim, extra=None):
            return {**base, "policy": policy, "prefix_reuse": score.reuse(),
                    "of_ceiling": score.reuse() / max(ceiling.reuse(), 1e-9),
                    "requests": len(score.ms), "refused": score.refused,
                    "over_budget": score.over_budget, "tokens_sent": score.total,
                    "mean_tokens": score.total / max(len(score.sizes), 1),
                    "verbatim_share": verbatim.share(),
                    "ms_median": statistics.median(score.ms) if score.ms else 0.0,
                    **(extra or {})}

        ours, verbatim = Score(tokens, budget), Verbatim(original)
        for keys, _stable, ms in requests:
            if keys is None:
                ours.refuse(ms)
            else:
                ours.request(keys, ms)
                verbatim.see(keys)
        rows.append(row("Session", ours, verbatim))

        counter = Counter(tokens)
        paths = {"Session": ours_path}
        for policy, play in [("trim_messages", play_trim),
                             ("SummarizationMiddleware", play_summarization)]:
            path = OUT / f"{policy}-{name}-{budget}.jsonl"
            out = Requests(path)
            score, verbatim = Score(tokens, budget), Verbatim(original)
            play(peers_session, budget, counter, score, verbatim, out)
            out.close()
            paths[policy] = path
            rows.append(row(policy, score, verbatim))
        played = time.time() - started
        priced = price(list(paths.values()))
        for r in rows[-3:]:
            r.update(money(priced[paths[r["policy"]].name]))
        if not keep:
            for path in paths.values():
                path.unlink()
        with results.open("a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows[-4:]))
        print(f"  {name} {budget}: {time.time() - started:.0f} s (ours {ours_s:.0f} s, "
              f"peers and scores {played - ours_s:.0f} s, "
              f"prices {time.time() - started - played:.0f} s)",
              file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=["family", "unseen"], default="family")
    parser.add_argument("--sessions", nargs="*", help="these members only")
    parser.add_argument("--max-turns", type=int, default=2000)
    parser.add_argument("--budgets", type=int, nargs="*", default=BUDGETS)
    parser.add_argument("--out", type=Path, help="the results file (JSONL)")
    parser.add_argument("--keep", action="store_true", help="keep the request files")
    parser.add_argument("--jobs", type=int, default=1, help="sessions measured at once")
    parser.add_argument("--summarize", type=Path, help="print the tables of a results file")
    args = parser.parse_args()
    if args.summarize:
        from family_report import report
        report([json.loads(line) for line in args.summarize.read_text().splitlines()])
        return
    ensure_venv(["langchain-core", "langchain", "bpe-openai"])
    OUT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "compaction-benches",
                    "--example", "session", "--example", "price"], cwd=ROOT, check=True)
    names = args.sessions or [m for m in members(args.set)
                              if int(m.split("-")[1]) <= args.max_turns]
    # The shortest first: a run stopped early has every short session whole; of the longest,
    # coding first (the time goal compares its 300 and 2,000 turns).
    names.sort(key=lambda m: (int(m.split("-")[1]), not m.startswith("coding")))
    results = args.out or OUT / f"family-{args.set}.jsonl"
    results.write_text("")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        runs = [pool.submit(measure, name, args.budgets, args.keep, results) for name in names]
        for run in as_completed(runs):
            run.result()
    print(f"results: {results}", file=sys.stderr)
    from family_report import report
    report([json.loads(line) for line in results.read_text().splitlines()])


if __name__ == "__main__":
    main()
