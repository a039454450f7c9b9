#!/usr/bin/env python3
"""The peer users pick today: LangChain's `trim_messages` on the transcript bench's messages.

Run from the repository root: `python3 benches/peers/trim_messages.py`

It installs `langchain-core` and `bpe-openai` with pip into a virtual environment under the
build directory (`$CARGO_TARGET_DIR` or `target/`), exports the bench's conversations from Rust
(`cargo run -p compaction-benches --example export_chat`): the coding one (10,000 messages) and
the chat-heavy one at 1,000, 10,000 and 100,000 messages. It times `trim_messages` on each with
the same budget, the same chat formula (`compaction::transcript::chat_tokens`) and exact o200k
counts (bpe-openai gives the counts tiktoken gives; tiktoken itself cannot fetch its encodings
offline), and on the chat-heavy ones also with LangChain's approximate counter
(`token_counter="approximate"`). Then, in the same run, it runs our bench (`--bench
transcript`) and prints the ratios issue 20's goals use:

- first compaction >= 10x faster than `trim_messages` with exact counts, and no slower than
  `trim_messages` with its approximate counter;
- re-compaction after one appended turn <= 1 ms at 10,000 messages, and flat (<= 1.5x) from
  1,000 to 100,000 messages.

`RUNS` (default 5; 3 for 100,000 messages) sets the samples per `trim_messages` timing.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
VENV = TARGET / "peers-venv"
RUNS = int(os.environ.get("RUNS", "5"))
CHAT_SIZES = [1_000, 10_000, 100_000]


def ensure_venv(packages: list[str]) -> None:
    """Re-runs this script inside a venv that has the peer's packages."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        venv.create(VENV, with_pip=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", *packages], check=True)
    os.execv(python, [str(python), *sys.argv])


def export(kind: str, messages: int) -> dict:
    out = TARGET / f"chat-{kind}-{messages}.json"
    subprocess.run(
        ["cargo", "run", "--release", "-q", "-p", "compaction-benches", "--example",
         "export_chat", "--", str(out), kind, str(messages)],
        cwd=ROOT, check=True,
    )
    return json.loads(out.read_text())


def to_langchain(exported: dict) -> list:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    messages = []
    for m in exported["messages"]:
        role, content = m["role"], m["content"]
        if role == "system":
            messages.append(SystemMessage(content))
        elif role == "user":
            messages.append(HumanMessage(content))
        elif role == "tool":
            messages.append(ToolMessage(content, tool_call_id=m["tool_call_id"]))
        else:
            calls = [
                {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"]),
                 "id": c["id"]}
                for c in m.get("tool_calls", [])
            ]
            messages.append(AIMessage(content, tool_calls=calls))
    return messages


def exact_counter():
    """The chat formula of compaction::transcript with exact o200k counts, summed over the
    list LangChain asks about (as it sums a per-message counter): 3 per message, role,
    content, tool call id, 3 + id + name + compact JSON arguments per call."""
    import bpe_openai

    enc = bpe_openai.get_encoding("o200k_base")
    roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}

    def count(text: str) -> int:
        return len(enc.encode_ordinary(text))

    def message_tokens(msg) -> int:
        tokens = 3 + count(roles[msg.type]) + count(msg.content)
        if msg.type == "tool":
            tokens += count(msg.tool_call_id)
        for call in getattr(msg, "tool_calls", []) or []:
            arguments = json.dumps(call["args"], separators=(",", ":"))
            tokens += 3 + count(call["id"]) + count(call["name"]) + count(arguments)
        return tokens

    def messages_tokens(messages) -> int:
        """What LangChain asks a counter: the tokens of a list of messages."""
        return sum(message_tokens(m) for m in messages)

    return messages_tokens


def time_trim(messages: list, budget: int, counter, runs: int) -> tuple[float, list]:
    """Median seconds of `trim_messages` to the budget (the last messages, starting on a human
    message, the system message kept), and what it kept."""
    from langchain_core.messages import trim_messages

    # The request budget includes the 3 reply-priming tokens, as ours does.
    limit = budget - 3
    times, kept = [], []
    for _ in range(runs):
        start = time.perf_counter()
        kept = trim_messages(
            messages, max_tokens=limit, token_counter=counter, strategy="last",
            include_system=True, start_on="human", allow_partial=False,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times), kept


def bench_medians(output: str) -> dict[str, float]:
    """Median milliseconds by bench name (`group/arg` for benches with arguments), read from
    divan's tree."""
    medians, group = {}, None
    for line in output.splitlines():
        # The tree's own "│" comes first; the columns' "│" follow the name.
        head = re.match(r"^([│├╰─\s]*)(\S+)(.*)$", line)
        if not head:
            continue
        cells = head.group(3).split("│")
        if len(cells) < 4:
            continue
        depth, name, fastest = len(head.group(1)) // 3, head.group(2), cells[0].strip()
        if depth <= 1:
            group = name
        key = name if depth <= 1 else f"{group}/{name}"
        median = parse_ms(cells[2])
        if fastest and median is not None:
            medians[key] = median
    return medians


def parse_ms(cell: str) -> float | None:
    """Milliseconds in a divan cell (`1.23 ms`), or None for a header or empty cell."""
    units = {"s": 1000.0, "ms": 1.0, "µs": 0.001, "ns": 1e-6}
    parts = cell.split()
    if len(parts) != 2 or parts[1] not in units:
        return None
    return float(parts[0]) * units[parts[1]]


def main() -> None:
    ensure_venv(["langchain-core", "bpe-openai"])
    counter = exact_counter()
    peers = {}

    coding = export("coding", 10_000)
    messages = to_langchain(coding)
    median, kept = time_trim(messages, coding["budget"], counter, RUNS)
    sent = counter(kept) + 3
    print(f"coding {len(messages)}: trim_messages exact: {len(kept)} kept, {sent} tokens; "
          f"median of {RUNS}: {median * 1000:.1f} ms")
    peers["coding/exact"] = median * 1000

    for size in CHAT_SIZES:
        exported = export("chat-heavy", size)
        messages = to_langchain(exported)
        runs = min(RUNS, 3) if size >= 100_000 else RUNS
        for name, how in [("exact", counter), ("approximate", "approximate")]:
            median, kept = time_trim(messages, exported["budget"], how, runs)
            sent = counter(kept) + 3
            print(f"chat-heavy {size}: trim_messages {name}: {len(kept)} kept, {sent} tokens "
                  f"(exact count); median of {runs}: {median * 1000:.1f} ms")
            peers[f"chat/{size}/{name}"] = median * 1000
        del messages, exported

    bench = subprocess.run(
        ["cargo", "bench", "-q", "-p", "compaction-benches", "--bench", "transcript"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    print("\ncompaction (cargo bench -p compaction-benches --bench transcript):")
    print(bench.rstrip())
    ours = bench_medians(bench)

    print("\nratios (medians, same run):")
    print(f"  coding 10000: trim_messages exact / compaction first: "
          f"{peers['coding/exact'] / ours['coding_first']:.2f}x (goal >= 10x)")
    for size in CHAT_SIZES:
        first = ours[f"chat_first/{size}"]
        print(f"  chat-heavy {size}: trim_messages exact / first compaction: "
              f"{peers[f'chat/{size}/exact'] / first:.2f}x (goal >= 10x); "
              f"approximate / first: {peers[f'chat/{size}/approximate'] / first:.2f}x (goal >= 1x)")
    again = {size: ours[f"chat_recompact/{size}"] for size in CHAT_SIZES}
    print(f"  chat-heavy re-compaction after one turn: "
          + ", ".join(f"{size}: {ms:.3f} ms" for size, ms in again.items())
          + f" (goal <= 1 ms at 10000); 100000 / 1000: {again[100_000] / again[1_000]:.2f}x "
          "(goal <= 1.5x)")
    same = {size: ours[f"chat_recompact_same_turn/{size}"] for size in CHAT_SIZES}
    print(f"  chat-heavy re-compaction after the same turn at every size: "
          + ", ".join(f"{size}: {ms:.3f} ms" for size, ms in same.items())
          + f"; 100000 / 1000: {same[100_000] / same[1_000]:.2f}x")


if __name__ == "__main__":
    main()
