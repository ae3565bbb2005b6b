"""Command line and emulation settings: sglang.launch_server's flags plus the SGLANG_EMU_* settings."""

from __future__ import annotations

import argparse
import math
import sys
import time

from . import perf

try:  # on a lab host the role installs the collection's sglang_defaults.py beside these modules
    from .sglang_defaults import SPEC_DEFAULT_MAX_RUNNING
except ImportError:  # in the sglang_deploy package: the collection's module_utils, its one home
    from ansible_collections.sglang.deploy.plugins.module_utils.sglang_defaults import SPEC_DEFAULT_MAX_RUNNING

BANNER = "EMULATED SGLang server: numbers are synthetic"
FAULTS = (
    "crash_on_load",
    "crash_mid_stream",
    "garbage",
    "never_ready",
    "http_500",
    "wrong",
    "nan_logprobs",
    "nondeterministic",
    "spec_changes_tokens",
    "stall",
    "slow",
)
# ServerArgs fields that hold secrets (sglang/srt/server_args.py): masked in /server_info and its launch command.
SECRET_ARGS = ("api_key", "admin_api_key", "ssl_keyfile_password")
DEFAULT_CONTEXT_LENGTH = 32768
TORCH_DIST_TIMEOUT_S = 1800  # --dist-timeout unset: torch's default process-group timeout, 30 minutes
EMU_SETTINGS = (  # (env var, flag dest, type, default)
    ("SGLANG_EMU_LOAD_S", "emu_load_s", float, 3.0),
    ("SGLANG_EMU_WARMUP_S", "emu_warmup_s", float, 1.0),
    ("SGLANG_EMU_TTFT_MS", "emu_ttft_ms", float, 80.0),
    ("SGLANG_EMU_DECODE_TOK_S", "emu_decode_tok_s", float, 172.0),
    ("SGLANG_EMU_AGGREGATE_TOK_S", "emu_aggregate_tok_s", float, 0.0),
    ("SGLANG_EMU_ACCEPT_LENGTH", "emu_accept_length", float, None),
    # The noise model (engine.Engine._redraw): the speed's relative sd, how often it moves, the draws' seed.
    ("SGLANG_EMU_NOISE", "emu_noise", float, 0.0),
    ("SGLANG_EMU_NOISE_PERIOD_S", "emu_noise_period_s", float, 2.0),
    ("SGLANG_EMU_NOISE_SEED", "emu_noise_seed", int, None),
    ("SGLANG_EMU_FAULT", "emu_fault", str, None),
    ("SGLANG_EMU_FAULT_MESSAGE", "emu_fault_message", str, None),
    ("SGLANG_EMU_WRONG_SHARE", "emu_wrong_share", float, 0.5),  # the fault wrong: the share answered wrongly
)


def log(message: str, err: bool = False) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] {message}", file=sys.stderr if err else sys.stdout, flush=True)


def bind_failed(exc: OSError) -> int:
    """uvicorn's line when the HTTP port cannot be bound (asyncio's message names the address); the exit status."""
    log(f"ERROR: [Errno {exc.errno}] {exc.strerror}", err=True)
    return 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sglang_deploy.emulator",
        description=BANNER + ". Takes sglang.launch_server's flags; unknown flags are ignored.",
        allow_abbrev=False,
    )
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=30000)
    p.add_argument("--api-key")
    p.add_argument("--admin-api-key")
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-num-steps", type=_count)
    p.add_argument("--speculative-eagle-topk", type=_count)
    p.add_argument("--speculative-num-draft-tokens", type=_count)
    p.add_argument("--reasoning-parser")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--context-length", type=_human_int)
    p.add_argument("--max-running-requests", type=_count)
    p.add_argument("--stream-response-default-include-usage", action="store_true")
    p.add_argument("--enable-cache-report", action="store_true")
    p.add_argument("--incremental-streaming-output", action="store_true")
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=_count, default=1)
    p.add_argument("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=_count, default=1)
    p.add_argument("--nnodes", type=_count, default=1)
    p.add_argument("--node-rank", type=_count, default=0)
    p.add_argument("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", type=_address)
    p.add_argument("--dist-timeout", type=_count)
    emu = p.add_argument_group("emulation settings (override the SGLANG_EMU_* environment)")
    for env, dest, kind, _default in EMU_SETTINGS:
        flag = "--" + dest.replace("_", "-")
        if dest == "emu_fault":
            emu.add_argument(flag, dest=dest, choices=FAULTS, help=f"overrides {env}")
        else:
            emu.add_argument(flag, dest=dest, type=_finite if kind is float else kind, help=f"overrides {env}")
    return p


def _human_int(text: str) -> int:
    units = {"k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}
    low = text.strip().lower()
    try:
        for suffix in sorted(units, key=len, reverse=True):
            if low.endswith(suffix):
                value = int(float(low[: -len(suffix)]) * units[suffix])
                break
        else:
            value = int(low)
    except (ValueError, OverflowError):
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a token count is needed, like 32768 or 32k (got {text!r})")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a whole number >= 0 is needed (got {text!r})")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port from 1 to 65535 is needed (got {text!r})")
    return value


def split_address(text: str) -> tuple[str, int]:
    """host:port or [v6]:port, as --dist-init-addr takes it; ValueError names the fix."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--dist-init-addr needs host:port, like 10.0.0.1:50000 (got {text!r})")
    return host, int(port)


def _address(text: str) -> str:
    try:
        split_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a finite number is needed (got {text!r})")
    return value


def split_argv(argv: list[str], known: set[str]) -> tuple[list[str], dict]:
    """Separate the flags this emulator knows from the rest; the rest become {dest: value}."""
    mine: list[str] = []
    ignored: dict = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        name = tok.split("=", 1)[0]
        values = []
        j = i + 1
        if "=" not in tok:
            while j < len(argv) and not argv[j].startswith("--"):
                values.append(argv[j])
                j += 1
        if name in known or not tok.startswith("--"):
            mine.extend(argv[i:j])  # argparse reports stray positionals as it would for sglang
        elif "=" in tok:
            ignored[name[2:].replace("-", "_")] = _guess_type(tok.split("=", 1)[1])
        elif values:
            vals = [_guess_type(v) for v in values]
            ignored[name[2:].replace("-", "_")] = vals[0] if len(vals) == 1 else vals
        else:
            ignored[name[2:].replace("-", "_")] = True
        i = j
    return mine, ignored


def _guess_type(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Config:
    """Resolved launch flags plus emulation settings."""

    def __init__(self, argv: list[str], environ: dict):
        parser = build_parser()
        known = {s for action in parser._actions for s in action.option_strings}
        mine, self.ignored_flags = split_argv(argv, known)
        ns = parser.parse_args(mine)
        self.args = ns
        self.argv = list(argv)
        self._emulation_settings(parser, ns, environ)
        self.perf = self._perf_model(parser, ns, environ)
        if self.fault is not None and self.fault not in FAULTS:
            parser.error(f"SGLANG_EMU_FAULT must be one of {', '.join(FAULTS)} (got {self.fault!r})")
        self._check_ranges(parser)
        if ns.skip_server_warmup:
            self.warmup_s = 0.0
        if ns.nnodes < 1 or ns.tp_size < 1 or ns.pp_size < 1:
            parser.error("--nnodes, --tp-size and --pp-size must be >= 1")
        self.dist_timeout = TORCH_DIST_TIMEOUT_S if ns.dist_timeout is None else ns.dist_timeout
        self.served_model_name = ns.served_model_name or ns.model_path
        self.context_length = ns.context_length or DEFAULT_CONTEXT_LENGTH
        self.spec = bool(ns.speculative_algorithm)
        self.spec_steps = self.spec_topk = self.spec_draft = None
        self.spec_assert_fails = False
        self.notes: list[str] = []
        if self.spec:
            self._speculative(ns)
        else:
            if self.accept_length not in (None, 1.0):
                self.notes.append("accept length ignored: no --speculative-algorithm")
            self.accept_length = 1.0
        if self.accept_length < 1:
            parser.error("accept length must be >= 1 (tokens per decode step)")
        self.max_running = ns.max_running_requests or (SPEC_DEFAULT_MAX_RUNNING if self.spec else None)

    def _emulation_settings(self, parser, ns, environ: dict) -> None:
        """Each EMU_SETTINGS value: its flag, else its environment variable, else its default."""
        for env, dest, kind, default in EMU_SETTINGS:
            value = getattr(ns, dest)
            if value is None and environ.get(env, "") != "":
                try:
                    value = (_finite if kind is float else kind)(environ[env])
                except (argparse.ArgumentTypeError, ValueError) as exc:
                    parser.error(f"{env}: {exc}")
            setattr(self, dest[4:], default if value is None else value)

    def _speculative(self, ns) -> None:
        """The speculative settings as SGLang resolves them, the accept length capped at num_steps + 1, and
        whether SGLang's assert on topk/draft tokens without num_steps fails."""
        eagle = ns.speculative_algorithm.upper() in ("EAGLE", "EAGLE3", "NEXTN")
        unset_steps = ns.speculative_num_steps is None
        if (
            eagle
            and unset_steps
            and (ns.speculative_eagle_topk is not None or ns.speculative_num_draft_tokens is not None)
        ):
            self.spec_assert_fails = True
        self.spec_steps = ns.speculative_num_steps or 3
        self.spec_topk = ns.speculative_eagle_topk or 1
        self.spec_draft = ns.speculative_num_draft_tokens or self.spec_steps + 1
        if self.accept_length is None:
            self.accept_length = 2.5
        if self.accept_length > self.spec_steps + 1:
            self.notes.append(f"accept length {self.accept_length} > num_steps + 1; using {self.spec_steps + 1}")
            self.accept_length = float(self.spec_steps + 1)

    def _check_ranges(self, parser) -> None:
        if self.decode_tok_s <= 0 or self.aggregate_tok_s < 0 or self.ttft_ms < 0:
            parser.error("decode rate must be > 0, aggregate rate and TTFT >= 0")
        if self.load_s < 0 or self.warmup_s < 0:
            parser.error("load and warm-up times must be >= 0")
        if not 0 <= self.noise < 1 or self.noise_period_s <= 0:
            parser.error("the noise must be from 0 to below 1 (0.05: 5% run to run) and its period > 0 seconds")
        if not 0 <= self.wrong_share <= 1:
            parser.error(
                f"SGLANG_EMU_WRONG_SHARE must be from 0 to 1 (0.5: half the questions; got {self.wrong_share})"
            )

    def settings(self) -> dict:
        return {
            "load_s": self.load_s,
            "warmup_s": self.warmup_s,
            "ttft_ms": self.ttft_ms,
            "decode_tok_s": self.decode_tok_s,
            "aggregate_tok_s": self.aggregate_tok_s,
            "accept_length": self.accept_length,
            "noise": self.noise,
            "noise_period_s": self.noise_period_s,
            "fault": self.fault,
            "wrong_share": self.wrong_share,
            "perf_model": self.perf,
        }

    def _perf_model(self, parser, ns, environ: dict) -> dict | None:
        """Apply the SYNTHETIC performance model (perf.py) of SGLANG_EMU_PERF_MODEL to the rates and the fault."""
        if not environ.get(perf.ENV):
            return None
        try:
            rules = perf.parse(environ[perf.ENV], FAULTS)
        except perf.ModelError as exc:
            parser.error(str(exc))
        flags = {**self.ignored_flags, **{k: v for k, v in vars(ns).items() if not k.startswith("emu_")}}
        found = perf.apply(rules, flags, environ)
        self.decode_tok_s *= found["decode"]
        self.aggregate_tok_s *= found["aggregate"]
        self.ttft_ms *= found["ttft"]
        if self.fault is None and found["fault"]:
            self.fault = found["fault"]
            self.fault_message = self.fault_message or found["message"]
        return {
            "synthetic": True,
            "rules_matched": found["matched"],
            "multipliers": {k: round(found[k], 6) for k in perf.FACTORS},
        }

    def redacted_argv(self) -> list[str]:
        """The command line with the value of every SECRET_ARGS flag (--flag VALUE or --flag=VALUE) as ***."""
        flags = {"--" + name.replace("_", "-") for name in SECRET_ARGS}
        out, hide = [], False
        for tok in self.argv:
            name = tok.split("=", 1)[0]
            if hide:
                out.append("***")
                hide = False
            elif tok in flags:
                out.append(tok)
                hide = True
            elif "=" in tok and name in flags:
                out.append(name + "=***")
            else:
                out.append(tok)
        return out
