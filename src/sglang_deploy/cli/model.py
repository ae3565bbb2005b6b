"""`sglang-deploy model lock | check | fetch`: lock a checkpoint's files by size and sha256 (from a folder or a Hub
repository at a commit), check a folder against a lock, download a Hub lock into the controller cache
(model_lock, model). The Hub token comes from HF_TOKEN in the environment, never from the command line."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from sglang_deploy.locks import model_lock
from ansible_collections.sglang.deploy.plugins.module_utils import model
from sglang_deploy.cli.errors import UsageError

_MODELS_HELP = f"folder of model locks ({model_lock.MODELS})"
_SMALL_HELP = (
    f"with --repo: the largest file kept in git, not LFS, that is downloaded and hashed "
    f"(default {model_lock.MAX_SMALL_FILE_BYTES >> 20}); one the Hub states larger is refused"
)
_ENDPOINT_HELP = "Hub endpoint, e.g. a mirror (default HF_ENDPOINT, else the Hub): https://, or http:// to loopback"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 10**7:  # NaN and inf fail too
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a number of seconds above 0, e.g. 3600")
    return value


def _mebibytes(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 0 < value <= 1 << 20:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a whole number of MiB from 1 to 1048576, e.g. 64")
    return value << 20


def _hub_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT", ""), help=_ENDPOINT_HELP)
    parser.add_argument(
        "--allow-insecure-endpoint",
        action="store_true",
        help="accept an http:// endpoint that is not loopback (the token and the files' metadata travel in clear)",
    )
    parser.add_argument(
        "--file-timeout",
        type=_seconds,
        default=model_lock.FILE_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of each file's download (default {model_lock.FILE_TIMEOUT}); a body past the file's "
        "size (the lock's, or the Hub's metadata when locking) is refused too",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="lock a checkpoint's files by sha256, check a folder, fetch from the Hub")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    lock = actions.add_parser(
        "lock",
        help="write MODELS/<name>.lock.yml: every file of a checkpoint with its size and sha256",
        description="From --path (a checkpoint folder, hashed here) or --repo at --revision (a commit; a branch "
        "or tag is resolved to its commit, which the lock records). The Hub token is read from HF_TOKEN.",
    )
    lock.add_argument("name", help="lock name (lower-case letters, digits, '.', '-')")
    source = lock.add_mutually_exclusive_group(required=True)
    source.add_argument("--path", type=Path, help="checkpoint folder on this machine (or a shared file system)")
    source.add_argument("--repo", help="Hub repository OWNER/NAME")
    lock.add_argument("--revision", help="with --repo: commit, branch or tag")
    _hub_options(lock)
    small = model_lock.MAX_SMALL_FILE_BYTES
    lock.add_argument("--max-small-file-mb", type=_mebibytes, default=small, metavar="MIB", help=_SMALL_HELP)
    lock.add_argument("--models-dir", type=Path, default=model_lock.MODELS, help=_MODELS_HELP)
    lock.set_defaults(func=run_lock)

    check = actions.add_parser(
        "check",
        help="compare a checkpoint folder with a lock and run the checks before a launch; exit 1 on any difference",
        description="Names each file missing, truncated, altered or not in the lock, then checks config.json and the "
        "safetensors index (every shard present with its locked size). Without --full, a file whose size and mtime "
        "match the folder's stamp (written when the role installed it) is not hashed again.",
    )
    check.add_argument("name", help="lock name")
    check.add_argument("folder", type=Path, help="checkpoint folder")
    check.add_argument("--full", action="store_true", help="hash every file")
    check.add_argument("--models-dir", type=Path, default=model_lock.MODELS, help=_MODELS_HELP)
    check.set_defaults(func=run_check)

    fetch = actions.add_parser(
        "fetch",
        help="download a Hub lock's files into the controller cache, each checked against the lock",
        description="What the sglang_model role does on the controller before copying to the hosts. The token is "
        "read from HF_TOKEN.",
    )
    fetch.add_argument("name", help="lock name")
    fetch.add_argument("--cache", type=Path, default=model_lock.default_cache(), help="controller cache folder")
    _hub_options(fetch)
    fetch.add_argument("--models-dir", type=Path, default=model_lock.MODELS, help=_MODELS_HELP)
    fetch.set_defaults(func=run_fetch)


def _load(args: argparse.Namespace) -> dict:
    try:
        return model_lock.load(args.name, args.models_dir)
    except model_lock.ModelLockError as exc:
        raise UsageError(str(exc)) from exc


def _hub(args: argparse.Namespace) -> dict:
    """The Hub keywords of model_lock.hub_entries and hub_download; the token from HF_TOKEN."""
    return {
        "token": os.environ.get("HF_TOKEN", ""),
        "endpoint": args.endpoint,
        "allow_insecure": args.allow_insecure_endpoint,
        "file_timeout": args.file_timeout,
    }


def run_lock(args: argparse.Namespace) -> int:
    if args.repo and not args.revision:
        raise UsageError("--repo needs --revision (a commit; a branch or tag is resolved to its commit)")
    if args.path and args.revision:
        raise UsageError("--revision goes with --repo; a folder has no revision")
    start = time.monotonic()
    try:
        if args.path:
            result = model_lock.lock_folder(args.name, args.path, args.models_dir)
        else:
            result = model_lock.lock_hub(
                args.name,
                args.repo,
                args.revision,
                args.models_dir,
                max_small_file=args.max_small_file_mb,
                **_hub(args),
            )
    except model_lock.ModelLockError as exc:
        print(f"sglang-deploy model lock: {exc}", file=sys.stderr)
        return 1
    lock = result.lock
    files = lock["files"]
    print(
        f"locked {lock['name']} in {time.monotonic() - start:.1f} s: {len(files)} files, "
        f"{sum(f['size'] for f in files) / 1e9:.2f} GB (sha256 hashed here {result.hashed_here}, "
        f"from the Hub's LFS metadata {len(files) - result.hashed_here})"
    )
    if lock["repository"]:
        resolved = "" if lock["revision"] == args.revision else f" (resolved from {args.revision})"
        print(f"  {lock['repository']} at commit {lock['revision']}{resolved}")
    print(f"wrote {result.path}")
    print(f"next: deploy with -e sglang_model_lock={lock['name']}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    lock = _load(args)
    lines = model.drift(str(args.folder), lock, full=args.full)
    if not lines:
        lines = model.launch_problems(str(args.folder), lock["files"])
    for line in lines:
        print(f"  {line}")
    if lines:
        print(f"{args.folder} does not match lock {lock['name']}: {len(lines)} problems")
        return 1
    print(f"{args.folder} matches lock {lock['name']} ({len(lock['files'])} files) and passes the launch checks")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    lock = _load(args)
    if not lock["repository"]:
        raise UsageError(f"lock {lock['name']} was made from a folder: there is no repository to fetch")
    folder = args.cache / f"{lock['name']}-{model.lock_id(lock)}"
    start = time.monotonic()
    try:
        downloaded = model_lock.hub_download(lock, str(folder), **_hub(args))
    except model_lock.ModelLockError as exc:
        print(f"sglang-deploy model fetch: {exc}", file=sys.stderr)
        return 1
    what = "downloaded and checked" if downloaded else "already there and matching the lock"
    print(f"{lock['name']} in {folder}: {len(lock['files'])} files {what} in {time.monotonic() - start:.1f} s")
    return 0
