"""Every relative link of the documentation resolves: README.md, docs/**/*.md and
lab/**/*.md, links and images (``[text](path)``, ``![alt](path)``), to a file or folder of
the checkout, and a ``#fragment`` into a Markdown file to one of its headings (GitHub's
anchors). Web addresses are not fetched. Static, single process."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(root=ROOT):
    yield os.path.join(root, "README.md")
    for folder in ("docs", "lab"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            yield from (os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".md"))


def _prose_lines(path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def anchors(path):
    """GitHub's heading anchors of a Markdown file: lower case, punctuation dropped, spaces
    to hyphens, a repeated heading numbered -1, -2, ..."""
    seen, out = {}, set()
    for _, line in _prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(root=ROOT):
    problems = []
    for path in markdown_files(root):
        for number, line in _prose_lines(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):  # not in inline code
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:, ...
                    continue
                file_part, _, fragment = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                where = f"{os.path.relpath(path, root)}:{number}: {target}"
                if not os.path.exists(resolved):
                    problems.append(f"{where} (no such file)")
                elif fragment and resolved.endswith(".md") and fragment.lower() not in anchors(resolved):
                    problems.append(f"{where} (no heading with that anchor)")
    return problems


def test_every_relative_link_of_the_docs_resolves():
    problems = broken_links()
    assert problems == [], "broken links in the documentation:\n" + "\n".join(problems)


def test_the_check_finds_a_broken_file_and_a_broken_anchor(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("[ok](docs/a.md#a-heading-twice-1) [gone](docs/b.md)\n"
                                        "`[code](not/checked.md)` [web](https://example.com/x)\n")
    (tmp_path / "docs" / "a.md").write_text("# A heading, twice\n## A heading twice\n[up](../README.md#nope)\n"
                                            "```\n[fenced](nowhere.md)\n```\n")
    assert broken_links(str(tmp_path)) == [
        "README.md:1: docs/b.md (no such file)",
        "docs/a.md:3: ../README.md#nope (no heading with that anchor)",
    ]


# User pages state facts, not the history behind them: issue numbers and commit hashes
# belong in lab/ (docs/index.md: "the dated records of the lab ... are kept apart").
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
# A hash of 7+ hex digits with a letter among them; an all-digit one only after "commit"
# (elsewhere it cannot be told from a number such as 16777216). A pin of another project's
# file, ``owner/repo@2626dc8``, says which upstream version was used and may stay.
COMMIT = re.compile(r"(?<!@)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b|\bcommit\s+`?[0-9]{7,40}\b")
# Pages that still cite them, each with why (none today; the check below fails once a
# listed page is clean, so an exception cannot outlive its reason).
CITES_HISTORY_FOR_NOW = {}


def user_pages(root=ROOT):
    yield os.path.join(root, "README.md")
    docs = os.path.join(root, "docs")
    yield from (os.path.join(docs, n) for n in sorted(os.listdir(docs)) if n.endswith(".md"))


def history_citations(root=ROOT):
    """{page: ["line: token", ...]} of the user pages citing an issue number or a commit."""
    found = {}
    for path in user_pages(root):
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                for m in (*ISSUE.finditer(line), *COMMIT.finditer(line)):
                    found.setdefault(os.path.relpath(path, root), []).append(f"{number}: {m.group(0)}")
    return found


def test_user_pages_cite_no_issue_numbers_or_commits():
    found = history_citations()
    unexpected = {page: hits for page, hits in found.items() if page not in CITES_HISTORY_FOR_NOW}
    assert unexpected == {}, "user pages citing issue numbers or commits (state the fact instead):\n" + \
        "\n".join(f"{page}:{hit}" for page, hits in unexpected.items() for hit in hits)
    clean = sorted(set(CITES_HISTORY_FOR_NOW) - set(found))
    assert clean == [], f"{clean} no longer cite(s) issues or commits: remove from CITES_HISTORY_FOR_NOW"


def test_the_history_check_finds_issues_and_commits_only(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Fixed in issue 40 (Issue #7), tfring commit `7466911`, 1234567 steps.\n")
    (tmp_path / "docs" / "a.md").write_text("```\nrun.py  # issues 3 and 4\n```\nat `a68380b`, horovod/horovod@2626dc8\n"
                                            "0x7fffffff, 16777216, deadbeef, cafe12, TFRING_RANK, [x](#issue-31)\n")
    assert history_citations(str(tmp_path)) == {
        "README.md": ["1: issue 40", "1: Issue #7", "1: commit `7466911"],
        "docs/a.md": ["2: issues 3", "4: a68380b"],
    }
