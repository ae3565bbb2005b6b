"""README.md and docs/ against the code: each `sglang-deploy` line parses, each repo path, playbook, profile, stack
bundle, role variable and environment variable they name exists, `./lab` is described as the script is, every
link between them (and the role READMEs) resolves, `validate --help` lists every rule, and the README stays short."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from sglang_deploy import cli
from sglang_deploy.rules import rules
from sglang_deploy.launch import profiles

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
DOC_PAGES = sorted((REPO / "docs").glob("*.md"))
# README.md and docs/: every check below reads them as one text; links are checked per file.
DOCS = {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8") for p in [REPO / "README.md", *DOC_PAGES]}
ALL_DOCS = "\n".join(DOCS.values())
LINKED = {**DOCS, **{p.relative_to(REPO).as_posix(): p.read_text() for p in REPO.glob("roles/*/README.md")}}
# Placeholders of the synopsis lines, filled with values the parser accepts.
PLACEHOLDERS = {
    "PROFILE": "baseline",
    "INVENTORY": "inventory/lab.yml",
    "HOSTS": "all",
    "HOST": "all",
    "VAR": "KEY",
    "X": "nextn",
    "key=value": "a=1",
}


def command_lines(prefix: str, text: str = ALL_DOCS) -> list:
    """Lines of the code blocks and inline code that start with `prefix`, comments cut off."""
    found = [m.group(1) for m in re.finditer(rf"^    ({re.escape(prefix)} .*?)(?:\s+#.*)?$", text, re.M)]
    # Inline code with arguments (a bare `sglang-deploy tune` names the command, it is not a command line).
    found += re.findall(rf"`({re.escape(prefix)} [^`\s]+ [^`]*)`", text)
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


def test_the_readme_is_short_and_has_the_cli_lines():
    assert len(README.splitlines()) < 250
    readme_commands = {w[0] for line in command_lines("sglang-deploy", README) for w in variants(line)}
    assert readme_commands >= {"deploy", "compare", "status", "rollback", "bench", "profiles", "render", "validate"}
    assert readme_commands >= {"lab", "tune", "stack"}


@pytest.mark.parametrize("argv", CLI_LINES, ids=" ".join)
def test_each_documented_command_parses(argv):
    args = cli.build_parser().parse_args(argv)
    assert callable(args.func)


@pytest.mark.parametrize("line", command_lines("ansible-playbook"))
def test_each_documented_playbook_exists(line):
    words = shlex.split(line)
    playbooks = [w for w in words if w.endswith(".yml") and words[words.index(w) - 1] not in ("-i", "-e")]
    assert playbooks and all((REPO / p).is_file() for p in playbooks), playbooks


def test_documented_profiles_and_bundles_exist():
    named = set(
        re.findall(r"(?:profile=|\./lab run |sglang-deploy (?:deploy|render|validate) )([a-z][\w.-]*)", ALL_DOCS)
    )
    for line in command_lines("sglang-deploy compare"):  # the profiles as the command line reads them
        named.update(cli.build_parser().parse_args(shlex.split(line)[1:]).profiles)
    assert named >= {"baseline", "nextn"}
    assert sorted(named - set(profiles.load_profiles())) == []
    bundles = re.findall(r"(?:sglang_stack_bundle=|sglang-deploy stack (?:fetch|lock) )([a-z][\w.-]*)", ALL_DOCS)
    assert bundles and sorted(b for b in bundles if not (REPO / "stacks" / f"{b}.yml").is_file()) == []


def test_documented_repo_paths_exist():
    paths = set(
        re.findall(
            r"`((?:\.ci|\.config|src|roles|playbooks|group_vars|inventory|stacks|molecule|tests|tools|docs|examples|"
            r"benchmarks|calibration|plugins|changelogs|meta)"
            r"(?:/[\w.-]+)*/?)`",
            ALL_DOCS,
        )
    )
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert missing == []


def _code_text() -> str:
    """Everything but the documentation: where a documented name must be defined or read."""
    skip = {".git", ".venv", "collections", "results", ".runner", "docs", "__pycache__"}
    texts = []
    for path in REPO.rglob("*"):
        if path.is_file() and path.suffix != ".md" and not skip & set(path.relative_to(REPO).parts):
            try:
                texts.append(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
    return "\n".join(texts)


def test_documented_variables_exist_in_the_code():
    """Every role or setting variable (`sglang_*`, `cuda_*`, `lab_*`) and environment variable (`SGLANG_DEPLOY_*`,
    `SGLANG_EMU_*`) the README or docs/ name in code quotes is defined or read somewhere outside the docs."""
    names = set(re.findall(r"`((?:sglang|cuda|lab)_[a-z0-9_]+|SGLANG_(?:DEPLOY|EMU)_[A-Z0-9_]+)`", ALL_DOCS))
    names |= set(re.findall(r"\b((?:sglang|cuda|lab)_[a-z0-9_]+): (?:true|false|\d)", ALL_DOCS))
    assert len(names) > 40
    words = set(re.findall(r"\w+", _code_text()))  # a name is defined or read where it stands as a whole word
    assert sorted(names - words) == []


def test_lab_commands_in_the_docs_exist_in_the_script():
    script = (REPO / "lab").read_text()
    for sub in set(re.findall(r"\./lab (\w+)", ALL_DOCS)):
        assert re.search(rf"^\s+{sub}\)", script, re.M), sub


def test_the_readme_says_what_lab_test_runs():
    """The README's account of `./lab test`: each lint command, each molecule scenario by name, and the stack
    scenario's syntax-only default, as the script has them."""
    script = (REPO / "lab").read_text()
    for command in ("yamllint --strict .", "ansible-lint", "ruff check", "ruff format --check"):
        assert f"`{command}`" in README and command in script, command
    assert "`molecule syntax -s stack`" in README and "molecule syntax -s stack" in script
    assert "`SGLANG_DEPLOY_STACK_TEST=1`" in README and 'SGLANG_DEPLOY_STACK_TEST:-}" != 1' in script
    scenarios = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))
    assert [s for s in scenarios if f"`{s}`" not in README] == []
    assert "exec ./lab test" in (REPO / ".ci" / "run").read_text()


def _anchors(text: str) -> set:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), re.M):
        out.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return out


LINKS = [
    (name, target)
    for name, text in LINKED.items()
    for target in re.findall(r"\]\(([^)\s]+)\)", text)
    if not re.match(r"[a-z]+:", target)
]


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{p}->{t}" for p, t in LINKS])
def test_each_link_resolves(page, target):
    path, _, anchor = target.partition("#")
    dest = (REPO / page).parent / path if path else REPO / page
    assert dest.exists(), f"{page}: {target}"
    if anchor:
        assert anchor in _anchors(dest.read_text(encoding="utf-8")), f"{page}: no heading for #{anchor} in {path}"


def test_the_docs_index_and_the_readme_link_every_page():
    index = DOCS["docs/README.md"]
    pages = [p.name for p in DOC_PAGES if p.name != "README.md"]
    assert [p for p in pages if f"]({p})" not in index] == []
    assert [p for p in pages if f"](docs/{p})" not in README] == []
    roles = sorted(p.parents[1].name for p in REPO.glob("roles/*/meta/main.yml"))
    assert [r for r in roles if f"](roles/{r}/README.md)" not in README] == []


def test_validate_help_lists_every_rule(capsys):
    assert (
        "`sglang-deploy validate --help` and `src/sglang_deploy/rules/rules.py` list all of them."
        in DOCS["docs/profiles.md"]
    )
    with pytest.raises(SystemExit):
        cli.main(["validate", "--help"])
    out = capsys.readouterr().out
    assert [r.id for r in rules.RULES if f"  {r.id} ({r.level}): " not in out] == []


def test_the_repository_map_names_every_module_of_the_package():
    """docs/repository.md's tables of the package and of the host package (plugins/module_utils): each module and
    subpackage is on them."""
    names = []
    for package in (REPO / "src" / "sglang_deploy", REPO / "plugins" / "module_utils"):
        names += [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
        names += [f"{p.name}/" for p in package.glob("*/") if p.name not in ("data", "__pycache__")]
    assert "readiness.py" in names and "bench/" in names
    assert [n for n in names if f"`{n}`" not in DOCS["docs/repository.md"]] == []
