#!/usr/bin/env python3
"""How long the URL-password rule takes on one long value: the regex it replaced (secret_names.URL_PASSWORD up to
this change) against secret_names.url_passwords, side by side on the same values.

Every launch value and extra variable goes through the rule, so a long value (a chat template, a JSON config)
made the old regex backtrack quadratically. Prints min/median/max seconds over --repeats runs per value, the date
and the command.

    .venv/bin/python benchmarks/url_password.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
import time

from sglang_deploy.secret_names import url_passwords

OLD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^/\s@]+)@")
SIZES_KIB = (1, 16, 64)
# Values of n bytes: plain letters (a long template), and a URL's start followed by letters.
SHAPES = {
    "letters": lambda n: "a" * n,
    "url-start": lambda n: "https://" + "a" * (n - 8),
}


def seconds(func, value: str, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        func(value)
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per value and rule (default 3)")
    args = parser.parse_args()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{now}; command: {' '.join([sys.executable, *sys.argv])}")
    print(f"{'value':10} {'KiB':>4} {'rule':6} {'min s':>9} {'median s':>9} {'max s':>9}")
    for shape, make in SHAPES.items():
        for kib in SIZES_KIB:
            value = make(kib * 1024)
            assert bool(OLD.search(value)) == bool(url_passwords(value))
            for rule, func in (("before", OLD.search), ("after", url_passwords)):
                times = seconds(func, value, args.repeats)
                print(
                    f"{shape:10} {kib:4} {rule:6} {min(times):9.5f} {statistics.median(times):9.5f} {max(times):9.5f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
