"""README.md and docs/*.md read as a manual, not a lab notebook (issue 43): history lives in the records under
results/, the pages keep what a thing does, how to use it, what it guarantees and the current figure, linked.

A page is cut into blocks: paragraphs, list items (with their wrapped lines) and table rows; headings, code blocks
(fenced, or indented four spaces after a blank line) and the text in code quotes are not read, nor are markdown links
into results/ (their text and target): a link to a record names the record, it tells no history.

Dated narrative: a paragraph or list item that, so read, names a calendar date (2026-12-03, 3 December, Dec 3), a
commit (a word of 7 to 40 hex digits with a letter a-f in it, or any such word after "at", "commit" or "commits")
or a session ("session 4"). Table rows are neither dated narrative nor counted: the share is dated paragraphs and
list items over all paragraphs and list items, and it may be at most 1/5 on each page.

A measured figure: a number with a unit of throughput (tok/s, tokens/s, req/s), of time (ms, s, min, seconds,
minutes, h, hours) or a percentage, or a ratio (1.5x faster / slower / speed-up); in a table row, any number outside
the first column when the header row names such a unit. A setting is not a measurement: a number within three words
after "default", "timeout", "deadline", "limit", "at most", "at least", "up to", "more than", "less than", "goal",
"threshold" or "bound", one in brackets right after a name in code quotes (`sglang_x` (600 s)), or one followed by
"by default", "deadline", "timeout", "limit" or "(bootstrap|confidence) interval". A paragraph, list item or table
row with a measured figure links a record (a markdown link into results/) in itself, or, for a table row, in the
table's header row or the paragraph or list item just above the table; or it says its figures are emulated/synthetic
("emulat...", "synthetic"). Every link into results/ resolves, and one into a record folder
(results/gpu-*/<record>/...) finds that record's README.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
MAX_DATED_SHARE = 1 / 5

RECORD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]*results/[^)\s]*)\)")
MONTH = r"(?:(?:Jan|Febr)uary|March|April|May|June|July|August|(?:Septem|Octo|Novem|Decem)ber|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?)"
DATE = re.compile(rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|{MONTH} \d{{1,2}}(?!\w)|\d{{1,2}} {MONTH}(?!\w))")
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b|\b(?:at|commits?) [0-9a-f]{7,40}\b")
SESSION = re.compile(r"\bsessions? \d+", re.I)
FIGURE = re.compile(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?:\s*[-–/]\s*\d[\d,]*(?:\.\d+)?)*"
    r"(?:\s?(?:tok/s|tokens/s|req/s|%)(?!\w)|[x×](?= (?:faster|slower|speed))|\s(?:ms|s|min|seconds|minutes|h|hours)\b)"
)
UNIT_HEADER = re.compile(r"tok/s|tokens/s|req/s|%|\b(?:ms|s|min|seconds|minutes)\b")
SETTING_BEFORE = re.compile(
    r"(?:\b(?:default|timeout|deadline|limit|at (?:most|least)|up to|(?:more|less) than|goals?|threshold|bounds?)\W+"
    r"(?:\S+\s+){0,3}|``\s*\()$",
    re.I,
)
SETTING_AFTER = re.compile(r"^\W*(?:by default|deadline|timeout|limit|(?:bootstrap|confidence) interval)", re.I)
EMULATED = re.compile(r"\bemulat|\bsynthetic\b", re.I)


def blocks(text: str) -> list:
    """[kind, text, context] for each paragraph ('para'), list item ('item') and table row ('row'); a row's
    context is (its table's header row, the paragraph or list item just above the table), another block's ("", "")."""
    out, cur, lead, header, prev_blank, fence = [], None, "", None, True, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence, cur = not fence, None
            continue
        if fence or (prev_blank and cur is None and line.startswith("    ")):
            continue  # code
        prev_blank = not line.strip()
        if prev_blank or line.startswith("#"):
            cur = None
            if line.startswith("#"):
                lead, header = "", None
            continue
        if line.lstrip().startswith("|"):  # a table, also one inside a list item
            cur = None
            if header is None:
                header = line
            elif not re.fullmatch(r"[|\s:-]+", line):
                out.append(["row", line, (header, lead)])
            continue
        header = None
        if re.match(r"\s*(?:[-*+]|\d+\.) ", line) or cur is None:
            cur = ["item" if re.match(r"\s*(?:[-*+]|\d+\.) ", line) else "para", line, ("", "")]
            out.append(cur)
        else:
            cur[1] += " " + line.strip()
        lead = cur[1]
    return out


def _prose(text: str) -> str:
    """The text as read for dates and figures: code quotes emptied, links into results/ dropped."""
    return RECORD_LINK.sub(" ", re.sub(r"`[^`]*`", "``", text))


def is_dated(text: str) -> bool:
    prose = _prose(text)
    return bool(DATE.search(prose) or COMMIT.search(prose) or SESSION.search(prose))


def measured_figures(text: str, header: str = "") -> list:
    """The measured figures of a block; `header`: a table row's header row, whose units its numbers carry."""
    prose = _prose(text)
    found = [
        m.group(0)
        for m in FIGURE.finditer(prose)
        if not SETTING_BEFORE.search(prose[: m.start()]) and not SETTING_AFTER.search(prose[m.end() :])
    ]
    if UNIT_HEADER.search(_prose(header)):
        found += re.findall(r"(?<![\w.])\d[\d,.]*", prose.strip().strip("|").partition("|")[2])
    return found


def problems(text: str, where: Path, root: Path = REPO) -> list:
    """What keeps the page `text` (a file in the folder `where` of the repository `root`) from being a manual."""
    found = []
    units = [b for b in blocks(text) if b[0] != "row"]
    dated = [b[1] for b in units if is_dated(b[1])]
    if units and len(dated) / len(units) > MAX_DATED_SHARE:
        found.append(f"{len(dated)} of {len(units)} paragraphs/items are dated narrative, e.g. {dated[0][:160]!r}")
    for _, block, context in blocks(text):
        figures = measured_figures(block, context[0])
        linked = RECORD_LINK.search(block) or RECORD_LINK.search(" ".join(context))
        marked = EMULATED.search(block) or EMULATED.search(" ".join(context))
        if figures and not (linked or marked):
            found.append(f"figures {figures[:3]} with no record link and not marked emulated: {block[:160]!r}")
    for target in RECORD_LINK.findall(text):
        dest = (where / target.partition("#")[0]).resolve()
        rel = dest.relative_to(root).parts
        inside = len(rel) > 3 or dest.is_dir()  # a record folder or a file in one, not a file beside the folders
        record = root.joinpath(*rel[:3]) if inside and rel[1].startswith("gpu-") else None
        if not dest.exists() or (record and not (record / "README.md").is_file()):
            found.append(f"link to a missing record: {target}")
    return found


@pytest.mark.parametrize("page", PAGES)
def test_the_page_is_a_manual_with_linked_figures(page):
    assert problems((REPO / page).read_text(encoding="utf-8"), (REPO / page).parent) == []


def test_the_rules_catch_what_they_name(tmp_path):
    """Each rule on a made-up page: dated prose, unlinked figures, a missing record; and what does not count."""
    assert is_dated("Again at commit 19e40ab the run took longer.")
    assert is_dated("On 2026-12-02 the CI read 971 s.") and is_dated("In session 3 we saw it.")
    assert is_dated("Measured on 3 December.") and is_dated("at 4724311 with dockerd") and is_dated("Dec. 3, 2026")
    assert not is_dated("Decision 3 and the 2 Marches.")
    assert not is_dated("See [the record](../results/gpu-h200/parity-2026-12-03-ce9fc89/README.md).")
    assert not is_dated("Fetch `stable-0.5.23-2026-11-30` first.")
    assert measured_figures("the sweep read 1461 tok/s and TTFT 77.9 ms, 30-35% of it; 1.8x faster")
    assert measured_figures("first deploy 279 s (SGLang's first start 106 s)") == ["279 s", "106 s"]
    assert measured_figures("the default timeout 600 s, a 5 s deadline, `sglang_x` (7200 s); 8x H100") == []
    assert measured_figures("the goals: within 2%; pauses over its threshold of 20 ms") == []
    table = "Intro.\n\n| level | output tok/s |\n|---|---|\n| c=1 | 202.3 / 204 |\n"
    assert blocks(table)[1] == ["row", "| c=1 | 202.3 / 204 |", ("| level | output tok/s |", "Intro.")]
    assert measured_figures("| c=1 | 202.3 / 204 |", "| level | output tok/s |") == ["202.3", "204"]
    linked = table.replace("Intro.", "Intro [r](results/gpu-h200/r/README.md).")
    assert problems(table, tmp_path, tmp_path)
    assert problems(linked, tmp_path, tmp_path) == ["link to a missing record: results/gpu-h200/r/README.md"]
    (tmp_path / "results/gpu-h200/r").mkdir(parents=True)
    (tmp_path / "results/gpu-h200/r/README.md").write_text("a record")
    assert problems(linked, tmp_path, tmp_path) == []
    (tmp_path / "results/gpu-h200/r.json").write_text("{}")
    assert problems(linked.replace("r/README.md", "r.json"), tmp_path, tmp_path) == []
    assert problems(table.replace("Intro.", "Intro, emulated."), tmp_path, tmp_path) == []
    dated = "At commit 19e40ab it took long.\n\nWhat it does.\n\n" * 1 + "More.\n\n" * 3
    assert problems(dated, tmp_path) == [] and problems(dated.replace("More", "Again at 3f2a1bc"), tmp_path)
    assert [b[0] for b in blocks("- item\n\n  | a | s |\n  |---|---|\n  | x | 5 |\n")] == ["item", "row"]
    assert blocks("text\n\n    code 12 s\n\n- item 5 s\n  wrapped\n") == [
        ["para", "text", ("", "")],
        ["item", "- item 5 s wrapped", ("", "")],
    ]
