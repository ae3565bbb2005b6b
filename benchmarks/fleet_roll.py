"""Rolling profile changes across the lab fleet under load: does a client of the router see any failed request?

Needs the lab fleet (`./lab fleet up`: three replicas running the EMULATED SGLang server and the smg router, on
the Docker network sglang-fleet); run it under the lab's Docker lock. Every figure is synthetic (emulated servers).

1. Brings every replica to the first profile (site.yml), so the rolls below start from one state.
2. A load generator sends --streams concurrent streaming /v1/chat/completions through the router (each stream
   one request after the other, --output-len tokens each) for --before seconds: the reference.
3. Rolls the second profile across the fleet with `ansible-playbook site.yml` while the load goes on.
4. Rolls the second profile again (it changes nothing): every replica must stay in the router (the router's journal
   has no "Reconciling workers" line in that time: it re-reads its worker list only when a roll rewrites it), no
   server restarts, and the run reports each replica "unchanged, not drained".
5. Rolls the first profile back across the fleet with the second replica's new server crashing while it loads
   (the emulator's fault, through an extra inventory source): the roll must stop there, that replica roll back,
   the third stay untouched (its server's start time unchanged), and the clients see no failure.

A request fails when its HTTP status is not 200, the connection breaks, or the stream ends without [DONE] or with
fewer tokens than asked for (usage.completion_tokens). TTFT = first token of any kind (a chunk with `content` or
`reasoning_content`) - request sent; TTFC = first content chunk - request sent: with a reasoning parser on, the
reasoning tokens come first, so TTFC is TTFT plus their decode time.
Prints per phase: requests sent, failed, TTFT and TTFC p50/p99, and the roll's wall time. Exit 1 when a request
failed or a roll did not end as it should.

    flock /tmp/sglang-docker.lock python benchmarks/fleet_roll.py [--streams 16] [--profiles baseline nextn]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INVENTORY = REPO / "inventory" / "fleet-lab.yml"
ROUTER, NETWORK, PORT = "sglang-fleet-router", "sglang-fleet", 8000
REPLICAS = ["sglang-fleet-1", "sglang-fleet-2", "sglang-fleet-3"]
API_KEY = "lab-fleet-key-0123456789"  # group_vars/fleet_lab.yml (lab only)
MODEL = "qwen3.5-397b"
# Host vars of the replica whose new server crashes while loading. Given in its own group (an extra inventory
# source): a host put straight under `all` would move to the front of the roll.
CRASH = {"sglang_server_env": {"SGLANG_EMU_FAULT": "crash_on_load"}}


class Load:
    """--streams threads, each sending one streamed request after the other through the router."""

    def __init__(self, host: str, streams: int, output_len: int):
        self.host, self.streams, self.output_len = host, streams, output_len
        self.records: list[dict] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(streams)]

    def start(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _loop(self) -> None:
        while not self.stop.is_set():
            rec = self._one()
            with self.lock:
                self.records.append(rec)

    def _one(self) -> dict:
        body = json.dumps(
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": "Tell me about the sea."}],
                "max_tokens": self.output_len,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
        t0 = time.monotonic()
        rec = {"start": t0, "ttft": None, "ttfc": None, "ok": False, "error": None}
        conn = http.client.HTTPConnection(self.host, PORT, timeout=60)
        try:
            conn.request(
                "POST",
                "/v1/chat/completions",
                body,
                {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"},
            )
            resp = conn.getresponse()
            if resp.status != 200:
                rec["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
                return rec
            done, tokens = False, None
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                deltas = [c.get("delta") or {} for c in chunk.get("choices", [])]
                if rec["ttft"] is None and any(d.get("content") or d.get("reasoning_content") for d in deltas):
                    rec["ttft"] = time.monotonic() - t0
                if rec["ttfc"] is None and any(d.get("content") for d in deltas):
                    rec["ttfc"] = time.monotonic() - t0
                if chunk.get("usage"):
                    tokens = chunk["usage"].get("completion_tokens")
            rec["ok"] = done and tokens == self.output_len
            if not rec["ok"]:
                rec["error"] = f"stream ended: done={done} completion_tokens={tokens}"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
            rec["end"] = time.monotonic()
        return rec

    def between(self, t0: float, t1: float) -> list[dict]:
        with self.lock:
            return [r for r in self.records if t0 <= r["start"] < t1]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))] if values else float("nan")


def figures(records: list[dict]) -> dict:
    out = {"sent": len(records), "failed": sum(not r["ok"] for r in records)}
    for key in ("ttft", "ttfc"):
        ms = [r[key] * 1000 for r in records if r[key] is not None]
        out |= {f"{key}_p50_ms": round(pct(ms, 50), 1), f"{key}_p99_ms": round(pct(ms, 99), 1)}
        out[f"{key}_mean_ms"] = round(statistics.fmean(ms), 1) if ms else None
    return out | {"errors": sorted({r["error"] for r in records if r["error"]})[:5]}


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()


def started(host: str) -> str:
    return docker("exec", host, "systemctl", "show", "sglang", "-p", "ActiveEnterTimestamp", "--value")


def serves(host: str) -> str:
    return docker("exec", host, "systemctl", "show", "sglang", "-p", "Description", "--value").rsplit(" ", 1)[-1]


def reconciles(since: float, until: float) -> list[str]:
    """The router's journal lines between two wall-clock times where it re-read its worker list."""
    out = docker(
        "exec", ROUTER, "journalctl", "-u", "smg", "--no-pager", "-o", "cat",
        "--since", f"@{since:.0f}", "--until", f"@{until + 1:.0f}",
    )  # fmt: skip
    return [line for line in out.splitlines() if "Reconciling workers" in line]


def roll(profile: str, *inventories: Path) -> tuple[int, float, str]:
    argv = ["ansible-playbook", "-i", str(INVENTORY)]
    for extra in inventories:
        argv += ["-i", str(extra)]
    t0 = time.monotonic()
    proc = subprocess.run(
        [*argv, str(REPO / "site.yml"), "-e", f"profile={profile}"], cwd=REPO, capture_output=True, text=True
    )
    return proc.returncode, time.monotonic() - t0, proc.stdout + proc.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--before", type=float, default=20.0, help="seconds of load before the first roll")
    ap.add_argument("--profiles", nargs=2, default=["baseline", "nextn"])
    args = ap.parse_args()
    first, second = args.profiles
    ok = True

    rc, wall, out = roll(first)
    if rc != 0:
        print(out[-3000:])
        sys.exit(f"could not bring the lab fleet to {first} (is it up? ./lab fleet up)")
    router = docker("inspect", "-f", f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}', ROUTER)
    print(
        f"EMULATED fleet (synthetic numbers): {len(REPLICAS)} replicas behind smg at {router}:{PORT}, "
        f"{args.streams} streams x {args.output_len} tokens"
    )

    load = Load(router, args.streams, args.output_len).start()
    t0 = time.monotonic()
    time.sleep(args.before)
    t1 = time.monotonic()
    rc1, wall1, out1 = roll(second)
    t2 = time.monotonic()
    after1 = {h: serves(h) for h in REPLICAS}
    ok &= rc1 == 0 and all(p == second for p in after1.values())

    started_noop = {h: started(h) for h in REPLICAS}
    wall_t = time.time()
    rc_noop, wall_noop, out_noop = roll(second)
    t_noop = time.monotonic()
    noop_reconciles = reconciles(wall_t, time.time())
    noop_kept = (
        rc_noop == 0
        and not noop_reconciles
        and {h: started(h) for h in REPLICAS} == started_noop
        and out_noop.count("state: unchanged, not drained") == len(REPLICAS)
    )
    ok &= noop_kept

    untouched_before = started(REPLICAS[2])
    with tempfile.TemporaryDirectory() as tmp:
        crash = Path(tmp) / "crash.yml"
        crash.write_text(json.dumps({"all": {"children": {"sglang_replicas": {"hosts": {REPLICAS[1]: CRASH}}}}}))
        rc2, wall2, out2 = roll(first, crash)
    t3 = time.monotonic()
    time.sleep(2)
    load.finish()
    after2 = {h: serves(h) for h in REPLICAS}
    stopped = (
        rc2 != 0
        and after2 == {REPLICAS[0]: first, REPLICAS[1]: second, REPLICAS[2]: second}
        and started(REPLICAS[2]) == untouched_before
        and "roll stopped" in out2
    )
    ok &= stopped

    phases = {
        "before": figures(load.between(t0, t1)),
        f"roll {first}->{second}": figures(load.between(t1, t2)),
        f"roll {second} again (no change)": figures(load.between(t2, t_noop)),
        f"roll {second}->{first}, 2nd crashes": figures(load.between(t_noop, t3)),
    }
    print(
        f"{'phase':34} {'sent':>6} {'failed':>6} {'ttft p50':>9} {'ttft p99':>9} {'ttfc p50':>9} {'ttfc p99':>9}  wall"
    )
    for (name, f), wall in zip(phases.items(), (args.before, wall1, wall_noop, wall2)):
        print(
            f"{name:34} {f['sent']:6} {f['failed']:6} {f['ttft_p50_ms']:8.1f}ms {f['ttft_p99_ms']:8.1f}ms "
            f"{f['ttfc_p50_ms']:8.1f}ms {f['ttfc_p99_ms']:8.1f}ms  {wall:.1f} s"
        )
        for err in f["errors"]:
            print(f"    error: {err}")
        ok &= f["failed"] == 0
    print(f"after roll 1: {after1} (rc {rc1})")
    print(
        f"no-op roll (rc {rc_noop}, {wall_noop:.1f} s): router re-read its worker list {len(noop_reconciles)} times"
        f"{': ' + '; '.join(noop_reconciles) if noop_reconciles else ''}; every replica kept in and not restarted:"
        f" {noop_kept}"
    )
    if not noop_kept:
        print(out_noop[-3000:])
    print(f"after roll 2: {after2} (rc {rc2}); third replica untouched: {started(REPLICAS[2]) == untouched_before}")
    if not stopped:
        print(out2[-3000:])
    walls = [round(w, 1) for w in (wall1, wall_noop, wall2)]
    print(json.dumps({"phases": phases, "roll_wall_s": walls, "noop_reconciles": noop_reconciles, "emulated": True}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
