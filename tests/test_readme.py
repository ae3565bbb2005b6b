"""The README's commands, paths and claims against the code: each `sglang-deploy` line parses, each repo path it
names exists, each profile and stack bundle it deploys is defined, and `validate --help` lists every rule."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from sglang_deploy import cli, rules
from sglang_deploy import profiles as prof

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
# Placeholders of the README's synopsis lines, filled with values the parser accepts.
PLACEHOLDERS = {
    "PROFILE": "baseline",
    "INVENTORY": "inventory/lab.yml",
    "HOSTS": "all",
    "VAR": "KEY",
    "X": "nextn",
    "key=value": "a=1",
}


def command_lines(prefix: str) -> list:
    """Lines of the README's code blocks and inline code that start with `prefix`, comments cut off."""
    found = [m.group(1) for m in re.finditer(rf"^    ({re.escape(prefix)} .*?)(?:\s+#.*)?$", README, re.M)]
    # Inline code with arguments (a bare `sglang-deploy tune` names the command, it is not a command line).
    found += re.findall(rf"`({re.escape(prefix)} [^`\s]+ [^`]*)`", README)
    return found


def variants(line: str) -> list:
    """A synopsis line as concrete commands: `[...]` dropped, `a | b` alternatives split, `up|down` -> up."""
    line = re.sub(r"\s*\[[^\]]*\]", "", line)
    head, _, rest = line.partition(" ")
    out = []
    for alt in rest.split(" | "):
        words = [PLACEHOLDERS.get(w, w).split("|")[0] for w in shlex.split(alt)]
        out.append(words)
    return out


CLI_LINES = [words for line in command_lines("sglang-deploy") for words in variants(line) if "--help" not in words]


def test_the_readme_has_cli_lines():
    assert {w[0] for w in CLI_LINES} >= {
        "deploy",
        "compare",
        "status",
        "rollback",
        "bench",
        "profiles",
        "render",
        "validate",
        "lab",
    }


@pytest.mark.parametrize("argv", CLI_LINES, ids=" ".join)
def test_each_readme_command_parses(argv):
    args = cli.build_parser().parse_args(argv)
    assert callable(args.func)


@pytest.mark.parametrize("line", command_lines("ansible-playbook"))
def test_each_readme_playbook_exists(line):
    words = shlex.split(line)
    playbooks = [w for w in words if w.endswith(".yml") and words[words.index(w) - 1] not in ("-i", "-e")]
    assert playbooks and all((REPO / p).is_file() for p in playbooks), playbooks


def test_readme_profiles_and_bundles_exist():
    named = set(re.findall(r"(?:profile=|\./lab run |sglang-deploy (?:deploy|render|validate) )([a-z][\w.-]*)", README))
    for line in command_lines("sglang-deploy compare"):  # the profiles as the command line reads them
        named.update(cli.build_parser().parse_args(shlex.split(line)[1:]).profiles)
    assert named >= {"baseline", "nextn"}
    assert sorted(named - set(prof.load_profiles())) == []
    for bundle in re.findall(r"sglang_stack_bundle=([a-z][\w.-]*)", README):
        assert (REPO / "stacks" / f"{bundle}.yml").is_file(), bundle


def test_readme_repo_paths_exist():
    paths = set(
        re.findall(
            r"`((?:\.ci|\.config|src|roles|playbooks|group_vars|inventory|stacks|molecule|tests|tools|"
            r"benchmarks|calibration|library|action_plugins|filter_plugins|module_utils)"
            r"(?:/[\w.-]+)*/?)`",
            README,
        )
    )
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert missing == []


def test_lab_commands_in_the_readme_exist_in_the_script():
    script = (REPO / "lab").read_text()
    for sub in set(re.findall(r"\./lab (\w+)", README)):
        assert re.search(rf"^\s+{sub}\)", script, re.M), sub


def test_validate_help_lists_every_rule(capsys):
    assert "`sglang-deploy validate --help` and `src/sglang_deploy/rules.py` list all of them." in README
    with pytest.raises(SystemExit):
        cli.main(["validate", "--help"])
    out = capsys.readouterr().out
    assert [r.id for r in rules.RULES if f"  {r.id} ({r.level}): " not in out] == []
