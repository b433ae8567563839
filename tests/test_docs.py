"""README.md and docs/*.md read as a new user reads them: every relative link and #anchor leads somewhere, and
every `specdec ...` command line they show is one the real parser accepts (options that exist, taking the
values shown). The command lines are parsed, never run."""

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from specdec.cli.commands import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^ *```([\w-]*)\n(.*?)^ *```", re.S | re.M)  # indented too: a block inside a list item
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
# A shell word that stands for a value the reader chooses (NAME, K, DIR, SECONDS): replaced by a valid value of
# the option it follows before parsing, so the line's options and arity are still checked.
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")
# What may come before `specdec` on a line that runs it
WRAPPERS = (("git", "bisect", "run"), ("/usr/bin/time", "-f", "%e"), ("nice", "-n", "19"))
SHELL_OPS = re.compile(r"[();&|]+")  # what shlex's punctuation_chars splits out: `&&`, `;`, `|`, `);`
KEYWORDS = {"do", "then", "else", "time"}  # `for ...; do specdec ...; done`


def _prose(text: str) -> str:
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces
    to hyphens; link and code markup read as their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings give (a repeated heading's second one gets -1, as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(page.read_text()), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """The relative links of a page (outside code) whose file, or whose #anchor in a Markdown page, is missing."""
    bad = []
    for link in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            bad.append(f"{page.name} -> {link} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            bad.append(f"{page.name} -> {link} (no such heading in {target.name})")
    return bad


def test_every_relative_link_and_anchor_in_readme_and_docs_resolves():
    bad = [b for page in PAGES for b in broken_links(page)]
    assert not bad, f"links that lead nowhere: {bad}"


def test_the_link_check_sees_a_missing_file_and_a_missing_anchor(tmp_path):
    """Negative control: a page whose links name a missing file and a missing heading is caught on both."""
    (tmp_path / "other.md").write_text("# Other page\n\n## `specdec ab`: one commit\n")
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](other.md#specdec-ab-one-commit) [b](other.md#gone) [c](missing.md) "
                    "[d](#title) [e](#nope) [f](https://example.org/x#y)\n\n```\n[g](not-checked.md)\n```\n")
    assert broken_links(page) == ["page.md -> other.md#gone (no such heading in other.md)",
                                  "page.md -> missing.md (no such file)",
                                  "page.md -> #nope (no such heading in page.md)"]


@pytest.mark.parametrize("heading, anchor", [
    ("## `specdec ab`: did this commit make it slower?", "specdec-ab-did-this-commit-make-it-slower"),
    ("## report.json of an engine report", "reportjson-of-an-engine-report"),
    ("## A user-sized pair: `export-gguf --grow`", "a-user-sized-pair-export-gguf---grow"),
    ("### specdec ab: one commit against another", "specdec-ab-one-commit-against-another"),
])
def test_slug_is_githubs_anchor(heading, anchor):
    assert slug(heading.lstrip("# ")) == anchor


def _logical_lines(block: str) -> list[str]:
    return block.replace("\\\n", " ").splitlines()


def command_lines(text: str) -> list[str]:
    """Every line of a shell block (bash, sh or untagged) and every inline code span that invokes `specdec` with
    arguments, continuation lines joined."""
    lines = [line for lang, body in FENCE.findall(text) if lang in ("", "bash", "sh", "console")
             for line in _logical_lines(body)]
    # inline: `specdec NAME` alone names a command in prose; with arguments it is a command line
    lines += [span for span in INLINE.findall(_prose(text)) if not re.fullmatch(r"specdec [\w-]+", span.strip())]
    return [line for line in lines if re.search(r"(^|[\s;&|])specdec\s", line + " ")]


def _synopsis(argv: list[str]) -> bool:
    """`[--flag]`, `...` and `<command>` mark a synopsis, which shows a command's shape, not a command line."""
    return any("[" in word or word == "..." or word.startswith("<") for word in argv)


def invocations(line: str) -> list[list[str]]:
    """The argument lists of every `specdec` the line runs (after `&&`, `;`, `|`, a wrapper or VAR=value);
    synopses left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: not a shell line
        return []
    out, segment = [], []
    for word in [*words, ";"]:
        if not SHELL_OPS.fullmatch(word):
            segment.append(word)
            continue
        while segment and (segment[0] in KEYWORDS or re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", segment[0])):
            segment = segment[1:]
        for wrapper in WRAPPERS:
            if tuple(segment[:len(wrapper)]) == wrapper:
                segment = segment[len(wrapper):]
        if segment[:1] == ["specdec"] and len(segment) > 1 and not _synopsis(segment):
            out.append(segment[1:])
        segment = []
    return out


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _fill_placeholders(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """A placeholder after an option becomes a value that option takes: its first choice, or 1 for a number."""
    sub = _subparsers(parser).get(argv[0])
    if sub is None:
        return argv
    options = {o: a for a in sub._actions for o in a.option_strings}
    out, action = list(argv), None
    for i, word in enumerate(argv[1:], 1):
        if word.startswith("-") and not re.fullmatch(r"-\d.*", word):
            action = options.get(word.split("=", 1)[0])
            continue
        if action is None or not PLACEHOLDER.fullmatch(word):
            continue
        if action.choices:
            out[i] = str(list(action.choices)[0])
        elif action.type in (int, float):
            out[i] = "1"
    return out


def parse_error(argv: list[str]) -> str | None:
    """What the real parser says against these arguments (None: accepted). Parsing runs no command."""
    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(_fill_placeholders(parser, argv))
    except SystemExit as exc:
        return err.getvalue().strip() or f"exit {exc.code}"
    return None


def _all_invocations() -> list[tuple[str, list[str]]]:
    return [(f"{page.name}: {line.strip()}", argv) for page in PAGES for line in command_lines(page.read_text())
            for argv in invocations(line)]


def test_the_pages_show_specdec_command_lines():
    """The extraction finds the commands README opens with, continuation lines and inline ones."""
    found = {" ".join(argv) for _, argv in _all_invocations()}
    assert {"report", "ab main HEAD", "ab GOOD HEAD", "load --slots 4"} <= found, sorted(found)[:20]
    assert len(found) > 60


def test_every_specdec_command_line_in_readme_and_docs_parses():
    bad = [f"{where}\n    {err}" for where, argv in _all_invocations() if (err := parse_error(argv))]
    assert not bad, "command lines the parser refuses:\n" + "\n".join(bad)


@pytest.mark.parametrize("line, argvs", [
    ("specdec ab main HEAD   # a comment --no-such", [["ab", "main", "HEAD"]]),
    ("SPECDEC_TIME_SCALE=2 specdec report --quick && specdec compare a b",
     [["report", "--quick"], ["compare", "a", "b"]]),
    ("git bisect run specdec ab GOOD HEAD", [["ab", "GOOD", "HEAD"]]),
    ("/usr/bin/time -f %e specdec load --slots 8", [["load", "--slots", "8"]]),
    ("pip install -e '.[bench]'", []),
    ("for i in $(seq 3); do specdec report --out aa/$i; done", [["report", "--out", "aa/$i"]]),
    ('pip install -e ".[plot,onnx,work]" && specdec report', [["report"]]),
    ("specdec verify [--draft NAME ...] [-k K]", []),
])
def test_invocations_reads_a_shell_line(line, argvs):
    assert invocations(line) == argvs


def test_command_lines_joins_continuations_and_skips_synopses():
    text = ("```\nspecdec load --slots 8 \\\n    --rates 2,6\n```\n\n```\nspecdec report [--quick]\n```\n\n"
            "Run `specdec <command> --help`, or `specdec ab A B --engine NAME`; `specdec load` names it.\n\n"
            "```python\nspecdec.generate(t)\n```\n")
    lines = command_lines(text)
    assert [argv for line in lines for argv in invocations(line)] == [
        ["load", "--slots", "8", "--rates", "2,6"], ["ab", "A", "B", "--engine", "NAME"]]


@pytest.mark.parametrize("argv, refused", [
    (["ab", "main", "HEAD", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["report", "--budget", "soon"], "invalid float value: 'soon'"),
    (["load", "--order", "random"], "invalid choice: 'random'"),
    (["export-gguf"], "the following arguments are required: out"),
])
def test_the_parse_check_sees_a_bad_line(argv, refused):
    """Negative control: an unknown option, a value of the wrong type or choice and a missing argument."""
    assert refused in (parse_error(argv) or "")


def test_placeholders_become_values_the_option_takes():
    assert parse_error(["ab", "A", "B", "--engine", "NAME", "--budget", "SECONDS"]) is None
    assert parse_error(["generate", "--draft", "NAME", "-k", "K"]) is None
    assert "invalid choice: 'fast'" in parse_error(["ab", "A", "B", "--engine", "fast"])


def test_verify_takes_drafts_one_option_each():
    """`--draft a --draft b` is the form every page shows (`--draft a b` only where the parser takes it)."""
    assert parse_error(["verify", "--draft", "bigram", "--draft", "ngram"]) is None


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n#", 1)[0]


def test_costs_are_stated_with_the_command_that_measures_them():
    """README's table of commands names what each costs beyond its budget, and every page that gives a cost
    gives the command that measures it (the figures themselves are measured, not asserted here)."""
    readme = (ROOT / "README.md").read_text()
    table = _section(readme, "## What it answers")
    assert "/usr/bin/time -f %e specdec ab main HEAD" in table
    for command in ("`specdec report`", "`specdec ab main HEAD`", "`asv run`", "`specdec load`"):
        row = next(line for line in table.splitlines() if line.startswith("|") and command in line)
        assert re.search(r"\d|/usr/bin/time -f %e", row.split(command, 1)[1]), f"no cost for {command}: {row}"
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:  # every placeholder filled
        assert "<<COST:" not in page.read_text(), page.name
    assert "outside `--budget`" in _section(readme, "## Reading a report")
    for page in ("ab.md", "asv.md", "load.md"):
        assert "/usr/bin/time -f %e" in (ROOT / "docs" / page).read_text(), page


def test_ab_exit_1_on_a_work_regression_or_a_failed_count_is_in_readme_and_ab_md():
    readme = _section((ROOT / "README.md").read_text(), "### specdec ab: one commit against another")
    assert "**Exit 1** when a row got worse in time *or* in\nwork, or a timing or counting worker failed" in readme
    row = next(line for line in (ROOT / "docs" / "ab.md").read_text().splitlines() if line.startswith("| 1 |"))
    assert "in work" in row and "a counting worker failed" in row


@pytest.mark.parametrize("drafts, ks", [(["bigram", "ngram"], [2, 4]), (["ngram"], [1, 2, 3])])
def test_ab_md_counts_the_rows_ab_worker_builds(drafts, ks):
    """docs/ab.md's row count for n drafts and m ks, 2 + m + n(2m + 2), is what `ab_rows._rows` builds."""
    import specdec
    from specdec.measure import ab_rows

    assert "2 + m + n·(2m + 2) rows: 16 at the defaults" in (ROOT / "docs" / "ab.md").read_text()
    cfg = {"target": None, "backend": "numpy", "dtype": None, "drafts": drafts, "ks": ks, "chars": 12,
           "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}
    rows = ab_rows._rows(specdec, cfg)
    n, m = len(drafts), len(ks)
    assert len(rows) == 2 + m + n * (2 * m + 2)
    assert all(call is not None for call, _ in rows.values())  # every row built, none unavailable


def test_work_md_states_the_calibration_and_its_check_from_their_data():
    """docs/work.md's calibration table is what tools/work_study.py renders from the studies' JSON (the data the
    figures come from, committed with the commands that make them): no figure is typed by hand, each study's
    command is shown, the shipped calibration is the calibration study's fit, the held-out studies' 110 pairs flag
    nothing with it (the counts made while ONNX Runtime's telemetry ran flag 81 of their 153), and the
    injections' A/A flags nothing while each injected change is flagged on the rows that run it."""
    import importlib.util
    import json

    from specdec.measure.work import work_calibration

    spec = importlib.util.spec_from_file_location("work_study_judge", ROOT / "tools" / "work_study_judge.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    docs = ROOT / "docs"
    names = ("work-calibration-study.json", "work-held-out-study.json", "work-held-out-study-2.json",
             "work-injections-study.json")
    cal, held_out, held_out_2, inj = (json.loads((docs / n).read_text()) for n in names)
    text = (docs / "work.md").read_text()
    shown = text.split("<!-- study-table -->\n", 1)[1].split("\n<!-- /study-table -->", 1)[0]
    assert shown == study.calibration_table(cal, inj)
    flat = text.replace("\\\n    ", "")
    for name, doc in zip(names, (cal, held_out, held_out_2, inj)):
        assert doc["method"] == work_calibration.work_pool.METHOD  # counted by the method the package ships
        words = doc["command"].split()
        aa, null = (words[words.index(w) + 1] for w in ("--aa", "--null"))
        trees = words[words.index("--only") + 1:]
        trees = trees[: next((i for i, w in enumerate(trees) if w.startswith("--")), len(trees))]
        assert "tools/work_study.py" in doc["command"] and f"--out docs/{name} --aa {aa} --null {null}" in text
        assert "--only " + " ".join(trees) in flat, name
    # the shipped file is the one docs/work.md names; the fit keys a calibration for the machine it runs on (its
    # CPU features, its libraries' versions), so a fit made here matches the shipped one in all but those
    shipped = study.fit(cal, "")
    named = re.findall(r"specdec/data/work-calibration/([0-9a-f]{16})\.json", flat)
    assert named and set(named) == {p.stem for p in work_calibration.SHIPPED.glob("*.json")}
    kept = json.loads((work_calibration.SHIPPED / f"{named[0]}.json").read_text())
    assert kept["id"] == work_calibration.key_id(kept["key"])
    machine = ("cpu", "versions")
    assert {k: v for k, v in kept["key"].items() if k not in machine} == \
        {k: v for k, v in shipped["key"].items() if k not in machine}
    assert kept["rows"] == shipped["rows"] and kept["figures"] == shipped["figures"]
    tests = len(study.TIMED_ROWS) + len(study.ROWS)
    for held in (held_out, held_out_2):
        pairs = study.pairs(held, kept, tests)
        assert (pairs["pairs"], pairs["rows"], pairs["flagged"]) == (55, 495, [])
    before = study.pairs(json.loads((docs / "work-held-out-study-v3.json").read_text()), kept, tests)
    assert (before["pairs"], before["flagged_pairs"]) == (153, 81)
    assert study.leave_one_out(cal, tests)["flagged"] == []
    judged = study.held_out(inj, shipped, tests)
    assert judged["aa-1"]["flagged"] == [] and judged["draft-copy"]["flagged"] == ["draft bigram"]
    rounds = ["round bigram k=4", "round ngram k=4", "spec bigram k=4", "spec ngram k=4"]
    assert judged["round-neg"]["flagged"] == judged["round-finite"]["flagged"] == rounds
    assert judged["pass-write3"]["flagged"] == sorted(["pass 1", "verify 5"] + rounds)
