#!/usr/bin/env python3
"""The peer users pick today: LangChain's `trim_messages` on the transcript bench's messages.

Run from the repository root: `python3 benches/peers/trim_messages.py`

It installs `langchain-core` and `bpe-openai` with pip into a virtual environment under the
build directory (`$CARGO_TARGET_DIR` or `target/`), exports the bench's 10,000 messages from
Rust (`cargo run -p compaction-benches --example export_chat`), times `trim_messages` on them
with the same budget and the same exact o200k counts (bpe-openai gives the counts tiktoken
gives; tiktoken itself cannot fetch its encodings offline) and the same chat formula
(`compaction::transcript::chat_tokens`), then runs our bench (`--bench transcript`) and prints
both times side by side.
"""

import json
import os
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
VENV = TARGET / "peers-venv"
RUNS = 5


def ensure_venv() -> None:
    """Re-runs this script inside a venv that has the peer's packages."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        venv.create(VENV, with_pip=True)
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "langchain-core", "bpe-openai"], check=True
    )
    os.execv(python, [str(python), *sys.argv])


def export_messages() -> dict:
    out = TARGET / "chat-10000.json"
    subprocess.run(
        ["cargo", "run", "--release", "-q", "-p", "compaction-benches", "--example",
         "export_chat", "--", str(out)],
        cwd=ROOT, check=True,
    )
    return json.loads(out.read_text())


def main() -> None:
    ensure_venv()
    import bpe_openai
    from langchain_core.messages import (
        AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages,
    )

    exported = export_messages()
    budget = exported["budget"]
    enc = bpe_openai.get_encoding("o200k_base")

    def count(text: str) -> int:
        return len(enc.encode_ordinary(text))

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

    roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}

    # The chat formula of compaction::transcript (3 per message, role, content, tool call id,
    # 3 + id + name + compact JSON arguments per call), one message at a time: LangChain sums a
    # per-message counter over each list it asks about.
    def message_tokens(msg: BaseMessage) -> int:
        tokens = 3 + count(roles[msg.type]) + count(msg.content)
        if isinstance(msg, ToolMessage):
            tokens += count(msg.tool_call_id)
        for call in getattr(msg, "tool_calls", []) or []:
            arguments = json.dumps(call["args"], separators=(",", ":"))
            tokens += 3 + count(call["id"]) + count(call["name"]) + count(arguments)
        return tokens

    # The request budget includes the 3 reply-priming tokens, as ours does.
    limit = budget - 3
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        kept = trim_messages(
            messages, max_tokens=limit, token_counter=message_tokens, strategy="last",
            include_system=True, start_on="human", allow_partial=False,
        )
        times.append(time.perf_counter() - start)
    sent = sum(message_tokens(m) for m in kept) + 3
    median = statistics.median(times)
    print(f"trim_messages (langchain-core, bpe-openai o200k): {len(messages)} messages -> "
          f"{len(kept)} kept, {sent} tokens (budget {budget}); median of {RUNS}: "
          f"{median * 1000:.1f} ms (min {min(times) * 1000:.1f} ms)")

    bench = subprocess.run(
        ["cargo", "bench", "-q", "-p", "compaction-benches", "--bench", "transcript"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    print("compaction (cargo bench -p compaction-benches --bench transcript):")
    print(bench.rstrip())
    for line in bench.splitlines():
        if "compact_first" in line:
            ours = parse_ms(line.split("│")[2])
            print(f"\ntrim_messages / compact_first (medians): {median * 1000 / ours:.2f}x")


def parse_ms(cell: str) -> float:
    value, unit = cell.split()
    return float(value) * {"s": 1000.0, "ms": 1.0, "µs": 0.001, "ns": 1e-6}[unit]


if __name__ == "__main__":
    main()
