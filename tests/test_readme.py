"""README.md is a short manual: it opens with the two set-up commands (CI runs the second verbatim), stays
under 25 KB, links every docs/ page, and keeps dated runs and commit hashes out of its prose (and docs/' prose).
That every link and anchor resolves, and every command line parses: tests/test_docs.py."""

import argparse
import re
from pathlib import Path

import pytest

import specdec
from specdec.cli.commands import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_BYTES = 25_000
MAX_DOCS_BYTES = 1_900_000  # one example report (eight drafts; its report.json 1.1 MB, more rounds on a faster VM) and the pages
FENCE = re.compile(r"```.*?```", re.S)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", README.read_text())


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code: where a reader takes a figure as a claim."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _local_links(page: Path) -> list[str]:
    return [m for m in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", m)]


def test_readme_opens_with_main_job_and_test_commands():
    main, tests = _commands()[:2]
    assert main.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && ")
    assert main.endswith("specdec report")
    # the tests' own venv: CI deletes and remakes it, so it must not be the one the main job's command made
    assert tests.startswith("python3 -m venv .venv-test && . .venv-test/bin/activate && pip install torch==2.13.0 && ")
    assert tests.endswith(" && ruff check . && pytest --benchmark-disable -n 2 --dist loadfile")


def _extras(command: str) -> set[str]:
    return {e for group in re.findall(r'pip install -e "\.\[([\w,-]+)\]"', command) for e in group.split(",")}


def test_main_job_installs_the_work_counter_and_says_where_valgrind_comes_from():
    """The main job's report counts instructions wherever valgrind or a PMU is present: it installs the `work`
    extra, and README says how to get valgrind where it is missing."""
    main = _commands()[0]
    assert {"plot", "onnx", "work"} <= _extras(main)
    setup = README.read_text().split("## What it answers", 1)[0]
    assert "apt-get install valgrind" in setup
    assert "python specdec/measure/work/work.py" in setup


def test_the_extras_readme_installs_are_pyprojects():
    declared = set(re.findall(r"^(\w+) = \[", (ROOT / "pyproject.toml").read_text().split(
        "[project.optional-dependencies]", 1)[1].split("\n[", 1)[0], re.M))
    named = set().union(*(_extras(c) for c in re.findall(r"```bash\n(.+?)```", README.read_text(), re.S)))
    assert "work" in declared and named and named <= declared, f"extras pyproject lacks: {named - declared}"


def test_ci_runs_the_readme_test_command_verbatim_and_removes_only_its_venv():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == _commands()[1]
    assert "rm -rf .venv-test" in ci and "rm -rf .venv" not in ci
    assert ".venv-test/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_license_pyproject_claims_is_there():
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 the specdec developers" in text


def test_package_torch_range_stays_open():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"torch>=2.2"' in pyproject and "torch==" not in pyproject


def test_readme_is_at_most_25_kb():
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; move method details to docs/"


def test_readme_links_the_docs_pages_and_the_example_report():
    links = set(_local_links(README))
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert pages and pages <= links, f"docs pages README does not link: {sorted(pages - links)}"
    assert "docs/example-report/report.md" in links


def _run_log(text: str) -> list[str]:
    """Dates, times of day and commit hashes in a page's prose: a figure is given with its command instead."""
    prose = _prose(text)
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b|\b\d\d:\d\d(?:-\d\d:\d\d)? UTC\b", prose)
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", prose) if re.search(r"\d", w) and re.search(r"[a-f]", w)]
    return dates + hashes


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_readme_and_docs_prose_have_no_dated_runs_or_commit_hashes(page):
    found = _run_log(page.read_text())
    assert not found, f"run-log material in {page.name}: {found}"


def test_the_run_log_check_sees_a_date_and_a_hash_in_prose_only():
    text = "Measured 2026-12-01 at 26a7a5d.\n\n```\nasv run 7118b1c^..main\n```\nand `git show 56fb0c4`.\n"
    assert _run_log(text) == ["2026-12-01", "26a7a5d"]


def test_readme_documents_every_command():
    parser = build_parser()
    commands = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = README.read_text()
    missing = [name for name in commands if f"specdec {name}" not in text]
    assert not missing, f"commands README does not show: {missing}"


# Every command that loads a model takes these; README says so in one sentence instead of in each synopsis line.
MODEL_FLAGS = {"--target", "--checkpoint", "--dtype", "--allow-download"}


def _synopsis() -> dict[str, set[str]]:
    """The flags of each `specdec CMD` line (and its continuation lines) in README's Commands block."""
    block = README.read_text().split("## Commands", 1)[1].split("```", 2)[1]
    flags, cmd = {}, None
    for line in block.splitlines():
        m = re.match(r"specdec (\S+)", line)
        if m:
            cmd = m.group(1)
            flags[cmd] = set()
        if cmd:
            flags[cmd] |= set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", line))
    return flags


def _parser_flags() -> dict[str, set[str]]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {o for a in p._actions for o in a.option_strings} - {"-h", "--help"}
            for name, p in sub.choices.items()}


def test_readme_synopsis_and_the_parser_agree_flag_for_flag():
    readme, parser = _synopsis(), _parser_flags()
    assert set(readme) == set(parser)
    for name in parser:
        assert readme[name] <= parser[name], f"README shows flags `specdec {name}` lacks: {readme[name] - parser[name]}"
        rest = parser[name] - readme[name]
        assert rest in (set(), MODEL_FLAGS), f"`specdec {name}` flags README's synopsis does not show: {rest}"
    sentence = README.read_text().split("Every command that loads a model takes", 1)[1].split("\n\n", 1)[0]
    assert all(f"`{f}" in sentence for f in MODEL_FLAGS)


def test_the_synopsis_check_sees_a_missing_flag():
    """Negative control: a flag the parser has and the synopsis lost is found."""
    parser = _parser_flags()
    readme = {**_synopsis(), "compare": _synopsis()["compare"] - {"--min-effect"}}
    assert parser["compare"] - readme["compare"] == {"--min-effect"} != MODEL_FLAGS


def test_readme_api_names_are_public():
    code = "\n".join(re.findall(r"```python\n(.+?)```", README.read_text(), re.S))
    used = set(re.findall(r"\bspecdec\.(\w+)", code))
    assert {"load_target", "make_draft", "generate", "speculative_generate"} <= used
    private = sorted(used - set(specdec.__all__))
    assert not private, f"README's API block uses names specdec does not export: {private}"


def test_readme_names_the_install_name():
    assert "`specdec-bench`" in README.read_text()


def test_example_headline_says_how_it_is_regenerated():
    text = README.read_text()
    section = text.split("## Example headline", 1)[1].split("\n## ", 1)[0]
    assert "specdec report --out docs/example-report" in section


def test_docs_hold_reference_not_a_run_archive():
    size = sum(p.stat().st_size for p in DOCS.rglob("*") if p.is_file())
    assert size <= MAX_DOCS_BYTES, f"docs/ holds {size} bytes; keep one example report and the pages' pictures"
