"""Fuzz: generated profiles (odd types, control characters, odd names) never give a traceback, and whatever
renders is never injected into another line, word or flag in any format. Deterministic seed."""

from __future__ import annotations

import json
import random
import re
import shlex

from sglang_deploy.launch import formats, profiles
from sglang_deploy.rules import rules
from sglang_deploy.launch.profile_render import format_launch

SEED = 20261130
ROUNDS = 3000
SETTINGS = profiles.load_settings()
SAFE = "ab-_.=/ \t\"'\\$`%;#{}[]:*?~!&|<>()ü\u2028\x1b"
CHARS = SAFE + "\n\r\x00\ufeff"
FLAGS = [
    "chat-template",
    "cuda-graph-bs",
    "host",
    "port",
    "tp-size",
    "model-path",
    "served-model-name",
    "api-key",
    "ssl-keyfile-password",
    "attention-backend",
    "trust-remote-code",
    "json-model-override-args",
    "hos",
    "lora-paths",
    "mem-fraction-static",
    "speculative-algorithm",
    "not-a-flag",
]
ENV = ["OMP_NUM_THREADS", "HF_TOKEN", "SGLANG_ENABLE_SPEC_V2", "KEY_VALUE_CACHE", "LD_PRELOAD", "DB_PASS"]


class Gen:
    """Hostile profiles use every character, type and name; mild ones stay within what renders, so the
    formats are checked on many launches (quotes, $, %, backslashes, tabs and non-ASCII included)."""

    def __init__(self, r: random.Random, hostile: bool):
        self.r, self.hostile = r, hostile

    def text(self) -> str:
        r = self.r
        s = "".join(r.choice(CHARS if self.hostile else SAFE) for _ in range(r.randint(0, 12)))
        return r.choice(["", "--", "-"]) + s if self.hostile and r.random() < 0.2 else s

    def scalar(self):
        r = self.r
        odd = [float("inf"), float("nan"), None] if self.hostile else []
        return r.choice(
            [self.text(), self.text(), r.randint(-5, 10**6), r.choice([0.5, 1e300, *odd]), r.random() < 0.5]
        )

    def value(self, depth: int = 0):
        kind = self.r.random()
        if kind < 0.7 or depth > 1:
            return self.scalar()
        if kind < 0.9 or not self.hostile:
            return [self.scalar() if not self.hostile else self.value(depth + 1) for _ in range(self.r.randint(0, 4))]
        return {self.text(): self.value(depth + 1) for _ in range(self.r.randint(0, 2))}

    def name(self, known: list[str]):
        r = self.r
        if not self.hostile or r.random() < 0.7:
            return r.choice(known)
        return r.choice([self.text(), r.randint(0, 9), "A" + self.text()])

    def profile(self) -> tuple[object, dict]:
        r = self.r
        flags = FLAGS if self.hostile else [f for f in FLAGS if "key" not in f and f != "hos"]  # hos: host twice
        env = ENV if self.hostile else ["OMP_NUM_THREADS", "SGLANG_ENABLE_SPEC_V2", "KEY_VALUE_CACHE", "LD_PRELOAD"]
        body = {
            "description": r.choice(["ok", self.text() or "ok", 5 if self.hostile else "d"]),
            "args": {self.name(flags): self.value() for _ in range(r.randint(0, 5))},
            "env": {self.name(env): self.value() for _ in range(r.randint(0, 3))},
        }
        return r.choice(["p", "p", self.text() or "p", 7] if self.hostile else ["p"]), body


# An oracle for the subset of systemd's ExecStart syntax that formats.exec_word writes (systemd.service(5)).
WORD = re.compile(r'"((?:[^"\\]|\\.)*)"|(\S+)')


def unit_words(line: str) -> list[str]:
    words = []
    for quoted, plain in WORD.findall(line):
        raw = plain if plain else re.sub(r"\\(.)", r"\1", quoted)
        words.append(raw.replace("%%", "%").replace("$$", "$"))
    return words


ENV_LINE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\`$]|\\["\\`$])*)"\Z')


def check_formats(launch: profiles.Launch) -> None:
    argv = launch.argv
    flags = [w for w in argv if w.startswith("--")]
    assert len(flags) == len([v for v in launch.args.values() if v is not False]), argv
    assert json.loads(format_launch(launch, "argv")) == argv

    unit = format_launch(launch, "unit", "/py").split("\n")
    assert unit[:2] == ["[Service]", "EnvironmentFile=/etc/sglang/sglang.env"]
    lines = unit[2:]
    assert lines[0].startswith("ExecStart=/py ") and len(lines) == 1 + len(flags)
    assert all(line.startswith("    --") for line in lines[1:])
    words = [w for line in lines for w in unit_words(line.removeprefix("ExecStart=").removesuffix(" \\"))]
    assert words[4:] == argv, (words, argv)

    env = format_launch(launch, "env")
    got = {}
    for line in env.split("\n") if env else []:
        m = ENV_LINE.match(line)
        assert m, line
        got[m.group(1)] = re.sub(r"\\(.)", r"\1", m.group(2))
    assert got == launch.env

    shell = format_launch(launch, "shell", "/py").replace(" \\\n", " ")
    assert "\n" not in shell and "\r" not in shell
    expected = (["env", *(f"{k}={v}" for k, v in launch.env.items())] if launch.env else []) + [
        "/py",
        "-m",
        "sglang.launch_server",
        *argv,
    ]
    assert shlex.split(shell) == expected


def test_generated_profiles_never_crash_or_inject():
    r = random.Random(SEED)
    rendered = refused = 0
    for _ in range(ROUNDS):
        gen = Gen(r, hostile=r.random() < 0.5)
        pname, body = gen.profile()
        settings = {**SETTINGS, "sglang_api_key": r.choice(["", "k" * 16, gen.text() if gen.hostile else ""])}
        launch, findings = rules.check(pname, {pname: body}, settings, r.choice(["0.5.9", "0.5.23"]))
        assert all(isinstance(f.message, str) and f.message for f in findings)
        if launch is None:
            refused += 1
            assert rules.errors(findings)
            continue
        rendered += 1
        for word in launch.argv:
            assert formats.unsafe_char(word) is None
        check_formats(launch)
    assert rendered > ROUNDS // 5 and refused > ROUNDS // 5, (rendered, refused)  # both sides are reached
