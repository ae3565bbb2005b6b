"""What a pre-launch rule is and sees: a finding, a rule, and the context (the launch's flags under any spelling,
its environment, release, facts and benchmark concurrency)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from packaging.version import Version

from ..launch.flags import flag_table
from ..launch.profiles import Launch

ERROR, WARNING, INFO = "error", "warning", "info"

ATTENTION_FLAGS = ("attention-backend", "prefill-attention-backend", "decode-attention-backend")
MAMBA_STRATEGY_FLAGS = ("mamba-radix-cache-strategy", "mamba-scheduler-strategy")


@dataclass(frozen=True)
class Finding:
    rule: str
    level: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Rule:
    id: str
    level: str
    summary: str
    needs: tuple[str, ...]
    check: Callable[["Ctx"], Iterable[str]]


class Ctx:
    """What a rule sees: the launch's flags (canonical names), env, version, facts, concurrency."""

    def __init__(self, launch: Launch, facts: dict[str, Any], concurrency: int | None):
        self.launch = launch
        self.args = launch.args
        self.env = launch.env
        self.version = Version(launch.sglang_version)
        self.table = flag_table(launch.sglang_version)
        self.facts = facts
        self.concurrency = concurrency

    def _get(self, name: str) -> Any:
        """The value of a flag under any of its spellings in the release (alias, canonical name)."""
        if name in self.args:
            return self.args[name]
        found = self.table.lookup(name)
        if found:
            for key, value in self.args.items():
                other = self.table.lookup(key)
                if other and other[1]["dest"] == found[1]["dest"]:
                    return value
        return None

    def arg(self, name: str, default: Any = None) -> Any:
        value = self._get(name)
        return default if value is None or value is False else value

    def on(self, name: str) -> bool:
        return self._get(name) is True

    def int_arg(self, name: str, default: int | None = None) -> int | None:
        value = self.arg(name)
        try:
            return int(value) if value is not None else default
        except (TypeError, ValueError):
            return default

    def version_in(self, lo: str | None = None, hi: str | None = None) -> bool:
        """lo <= the release < hi."""
        return (lo is None or self.version >= Version(lo)) and (hi is None or self.version < Version(hi))

    @property
    def spec(self) -> str | None:
        value = self.arg("speculative-algorithm")
        return str(value).upper() if value else None

    @property
    def tp(self) -> int:
        return self.int_arg("tp-size", 1) or 1

    @property
    def pp(self) -> int:
        return self.int_arg("pp-size", 1) or 1

    @property
    def mamba_strategy(self) -> str:
        for name in MAMBA_STRATEGY_FLAGS:
            if self.arg(name):
                return str(self.arg(name))
        return "auto"

    @property
    def sm12x(self) -> bool:
        return str(self.facts["gpu_arch"]).lower().replace(".", "").startswith(("sm_12", "sm12", "12"))

    @property
    def quantization(self) -> str | None:
        value = self.arg("quantization") or self.facts.get("model_quantization")
        return None if value in (None, "none") else str(value)
