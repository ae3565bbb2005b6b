"""The sent-against-captured figures of README.md: request i of load.jsonl against request i of captured.jsonl."""

import json
import statistics as st

L = [json.loads(x) for x in open("load.jsonl")]
C = [json.loads(x) for x in open("captured.jsonl")]
print("requests", len(L), len(C))
l0, c0 = L[0]["timestamp"], C[0]["timestamp"]
dt = sorted(abs((c["timestamp"] - c0) - (x["timestamp"] - l0)) for x, c in zip(L, C))
print(f"arrival |diff| ms: median {st.median(dt):.1f} p99 {dt[int(0.99 * len(dt))]:.1f} max {dt[-1]:.1f}")
print("output lengths not exact:", sum(c["output_length"] != x["output_length"] for x, c in zip(L, C)))
d = [c["input_length"] - x["input_length"] for x, c in zip(L, C)]
print(f"input diff min {min(d)} median {st.median(d)} max {max(d)}")


def reuse(records):
    seen, again, total = set(), 0, 0
    for r in records:
        for h in r["hash_ids"]:
            total, again = total + 1, again + (h in seen)
            seen.add(h)
    return again / total


print(f"reuse sent {reuse(L):.3f} captured {reuse(C):.3f}")
print(f"span sent {(L[-1]['timestamp'] - l0) / 1000:.1f} s captured {(C[-1]['timestamp'] - c0) / 1000:.1f} s")
