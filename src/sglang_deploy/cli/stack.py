"""`sglang-deploy stack lock | fetch | prune | canary`: resolve a floating bundle into a hash lock; download its wheels;
delete the wheels no lock names (stack_lock, stack_files); try a bundle on one host and promote it when it answers
right (api.canary)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sglang_deploy import api
from sglang_deploy.cli.extravars import parse_extravars
from sglang_deploy.cli.progress import Progress
from sglang_deploy.compare import gate
from sglang_deploy.locks import stack_files, stack_lock
from ansible_collections.sglang.deploy.plugins.module_utils import wheel_fetch
from sglang_deploy.cli.errors import UsageError
from sglang_deploy.paths import STACKS


def _positive(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: a number greater than 0")
    return value


def _jobs(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 32:
        raise argparse.ArgumentTypeError(f"{text}: from 1 to 32 parallel downloads")
    return value


_WHEELHOUSE_HELP = "controller wheelhouse (SGLANG_DEPLOY_WHEELHOUSE or ~/.cache/sglang-deploy/wheelhouse)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stack", help="lock a stack bundle and fetch its wheels (see docs/stacks.md)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    lock = actions.add_parser(
        "lock",
        help="resolve a floating bundle with uv into a new dated, hash-locked bundle",
        description="Writes STACKS/<name>.yml (exact pins, SGLang commit) and <name>.lock.yml "
        "(every wheel: version, file, URL, sha256). Wheels from extra indexes and SGLang "
        "built from git are downloaded or built into the wheelhouse and hashed there.",
    )
    _common(lock)
    lock.add_argument("--name", help="name of the locked bundle (default BUNDLE-YYYY-MM-DD)")
    lock.add_argument(
        "--wheels",
        type=Path,
        help="a bundle layered on an image's Python (base): lock the wheels of this folder, each with its sha256 "
        "(the wheels the image lacks; nothing is resolved)",
    )
    lock.set_defaults(func=run_lock)

    fetch = actions.add_parser(
        "fetch",
        help="download every wheel of a locked bundle into the wheelhouse",
        description="Each wheel is checked against the lock's sha256; the ones already "
        "there and intact are kept. Exit 1 when a download does not match.",
    )
    _common(fetch)
    fetch.add_argument("--jobs", type=_jobs, default=4, help="parallel downloads (4; 1 to 32)")
    fetch.add_argument(
        "--timeout",
        type=_positive,
        default=wheel_fetch.FETCH_TIMEOUT,
        help=f"seconds for all downloads together ({wheel_fetch.FETCH_TIMEOUT}); then they stop, keeping no partial file",
    )
    fetch.add_argument(
        "--max-wheel-gb",
        type=_positive,
        default=wheel_fetch.MAX_WHEEL_BYTES / 1e9,
        help=f"a download past this many GB is stopped and removed ({wheel_fetch.MAX_WHEEL_BYTES / 1e9:g})",
    )
    fetch.set_defaults(func=run_fetch)

    prune = actions.add_parser(
        "prune",
        help="list (or --delete) the wheelhouse's wheels that no lock names",
        description="Lists the wheels in the controller wheelhouse (and downloads left unfinished) that no "
        "*.lock.yml in the stacks folders names; deletes them only with --delete. A lock that cannot be read stops "
        "it before anything is deleted. Do not run it while `stack lock` runs: the wheels it downloads are named by "
        "no lock until it has written one.",
    )
    prune.add_argument(
        "--stacks-dir",
        type=Path,
        action="append",
        help=f"folder of bundle and lock files; repeat for several (default {STACKS})",
    )
    prune.add_argument("--wheelhouse", type=Path, default=stack_files.default_wheelhouse(), help=_WHEELHOUSE_HELP)
    prune.add_argument("--delete", action="store_true", help="delete them (default: only list them)")
    prune.set_defaults(func=run_prune)

    canary = actions.add_parser(
        "canary",
        help="try a bundle on one host, held against its current stack by the quality gate; promote it on a pass",
        description="Re-deploys what HOST serves on its current stack (its gate keeps the reference fingerprint), "
        "deploys the same profile on BUNDLE with the gate held against that fingerprint, and only when it passes "
        "writes sglang_stack_bundle: BUNDLE into the group_vars file --into. A failure rolls HOST back to its last "
        "good profile and stack and changes no file. Exit status: 0 promoted (or passed), 1 refused or failed, "
        "2 usage error. See docs/quality.md#stack-upgrades.",
    )
    canary.add_argument("bundle", help="the candidate bundle (stacks/<name>.yml), locked where it can be")
    canary.add_argument("--host", required=True, help="the canary: one server host of the inventory")
    canary.add_argument("-i", "--inventory", metavar="PATH", help="inventory (default: inventory/lab.yml)")
    canary.add_argument(
        "-e", "--extra-vars", dest="extravars", action="append", default=[], metavar="VARS",
        help="extra variables for every run (as for deploy)",
    )  # fmt: skip
    canary.add_argument(
        "--into",
        type=Path,
        help=f"group_vars file to promote the bundle into (default {api.canary_target()})",
    )
    canary.add_argument("--no-promote", action="store_true", help="only try it: write no file")
    canary.add_argument("--benchmark", action="store_true", help="also benchmark the candidate")
    canary.add_argument("--stacks-dir", type=Path, default=STACKS, help=f"folder of bundle files ({STACKS})")
    canary.add_argument("--json", action="store_true", help="machine-readable result on stdout")
    canary.set_defaults(func=run_canary)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", help="bundle name (stacks/<name>.yml)")
    p.add_argument("--stacks-dir", type=Path, default=STACKS, help=f"folder of bundle files ({STACKS})")
    p.add_argument("--wheelhouse", type=Path, default=stack_files.default_wheelhouse(), help=_WHEELHOUSE_HELP)


def _bundle(args: argparse.Namespace) -> dict:
    try:
        return stack_files.load_bundle(args.bundle, args.stacks_dir)
    except stack_lock.LockError as exc:
        raise UsageError(str(exc)) from exc


def run_lock(args: argparse.Namespace) -> int:
    bundle = _bundle(args)
    errors = stack_lock.floating_errors(bundle)
    if errors:
        raise UsageError(f"bundle {args.bundle} cannot be locked: " + "; ".join(errors))
    if bool(bundle.get("base")) != bool(args.wheels):
        raise UsageError(
            f"bundle {args.bundle}: --wheels DIR locks a bundle layered on an image's Python (base), and only such a "
            "bundle; "
            + ("give the folder of the wheels the image lacks" if bundle.get("base") else "leave --wheels out")
        )
    start = time.monotonic()
    try:
        if args.wheels:
            result = stack_lock.lock_wheels(bundle, args.wheels, args.stacks_dir, name=args.name)
        else:
            result = stack_lock.lock(bundle, args.stacks_dir, args.wheelhouse, name=args.name)
    except stack_lock.LockError as exc:
        print(f"sglang-deploy stack lock: {exc}", file=sys.stderr)
        return 1
    packages = result.lock["packages"]
    sources = ("index", "download", "build", "wheelhouse")
    by_source = {source: sum(p["sha256_from"] == source for p in packages) for source in sources}
    print(
        f"locked {bundle['name']} as {result.bundle['name']} in {time.monotonic() - start:.1f} s: {len(packages)} "
        f"packages (sha256 from the index {by_source['index']}, from the download {by_source['download']}, "
        f"from a build {by_source['build']}, from the wheel folder {by_source['wheelhouse']})"
    )
    print(
        f"  torch {result.bundle['torch']['version']}, {result.bundle['flashinfer'].get('package', 'flashinfer-python')} "
        f"{result.bundle['flashinfer']['version']}, sglang "
        f"{result.bundle['sglang'].get('version') or result.bundle['sglang'].get('commit')}"
    )
    for note in result.notes:
        print(f"  note: {note}")
    print(f"wrote {result.bundle_file} and {result.lock_file}")
    first = (
        f"the role takes the wheels from {args.wheels} (-e sglang_stack_wheelhouse={args.wheels})"
        if args.wheels
        else f"sglang-deploy stack fetch {result.bundle['name']}"
    )
    print(f"next: {first}; then deploy with -e sglang_stack_bundle={result.bundle['name']}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    bundle = _bundle(args)
    try:
        lock = stack_files.load_lock(bundle, args.stacks_dir)
    except stack_lock.LockError as exc:
        raise UsageError(str(exc)) from exc
    start = time.monotonic()
    try:
        result = stack_files.fetch(
            lock, args.wheelhouse, jobs=args.jobs, max_bytes=int(args.max_wheel_gb * 1e9), timeout=args.timeout
        )
    except (stack_lock.LockError, OSError) as exc:
        print(f"sglang-deploy stack fetch: {exc}", file=sys.stderr)
        return 1
    print(
        f"{result.files} wheels of {bundle['name']} in {result.wheelhouse} ({result.total_bytes / 1e9:.2f} GB), all "
        f"matching the lock; downloaded {result.downloaded} ({result.bytes_downloaded / 1e9:.2f} GB) "
        f"in {time.monotonic() - start:.1f} s"
    )
    return 0


def run_prune(args: argparse.Namespace) -> int:
    stacks_dirs = args.stacks_dir or [STACKS]
    try:
        result = stack_files.prune(args.wheelhouse, stacks_dirs, delete=args.delete)
    except stack_lock.LockError as exc:
        raise UsageError(str(exc)) from exc
    size = sum(bytes_ for _, bytes_ in result.unreferenced)
    print(
        f"{len(result.locks)} locks in {', '.join(map(str, stacks_dirs))} name {result.kept} wheels in "
        f"{args.wheelhouse} ({result.kept_bytes / 1e9:.2f} GB)"
        + (f"; {result.missing} named wheels are not there (stack fetch BUNDLE)" if result.missing else "")
    )
    for path, bytes_ in result.unreferenced:
        print(f"  {path.relative_to(args.wheelhouse)}  {bytes_ / 1e6:.1f} MB")
    if not result.unreferenced:
        print("every wheel there is named by a lock: nothing to prune")
    elif result.deleted:
        print(f"deleted these {len(result.unreferenced)} wheels ({size / 1e9:.2f} GB) that no lock names")
    else:
        print(
            f"no lock names these {len(result.unreferenced)} wheels ({size / 1e9:.2f} GB); nothing deleted: "
            "run again with --delete to delete them"
        )
    return 0


def run_canary(args: argparse.Namespace) -> int:
    try:
        if args.inventory:
            api.inventory_path(args.inventory)
        extravars = parse_extravars(args.extravars)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    try:
        with Progress() as progress:
            result = api.canary(
                args.bundle,
                args.host,
                args.inventory,
                into=args.into,
                promote=not args.no_promote,
                benchmark=args.benchmark,
                stacks_dir=args.stacks_dir,
                extravars=extravars,
                on_event=progress,
            )
    except api.CanaryError as exc:
        print(f"sglang-deploy stack canary: {exc}", file=sys.stderr)
        return 1
    if args.json:
        fields = {k: v for k, v in vars(result).items() if k != "runs"}
        print(json.dumps({**fields, "artifacts": [r.artifacts for r in result.runs]}, indent=2, default=str))
        return 0 if result.passed else 1
    lab = " (lab: emulated server; the bundle's name only picks the emulator's behaviour)" if result.emulated else ""
    print(f"{result.host} serves {result.profile}; current stack {result.current}; candidate {result.candidate}{lab}")
    print(f"quality gate on {result.candidate}: {gate.text(result.gate)}" + _drift(result.gate))
    if not result.passed:
        print(f"REFUSED: {result.why}")
        print(f"{result.host} is back on its last good profile and stack; the inventory is unchanged")
        return 1
    if result.promoted is None:
        print(f"passed; not promoted (--no-promote): deploy it with -e sglang_stack_bundle={result.candidate}")
    else:
        print(result.promoted or f"{result.into} names {result.candidate} already")
        print(f"promoted into {result.into}; roll it out: sglang-deploy deploy {result.profile}")
    return 0


def _drift(g: dict | None) -> str:
    if not g or g.get("drift") is None:
        return ""
    return f"; largest logprob drift {g['drift']:.3f} nats against {g.get('reference') or 'the reference'}"
