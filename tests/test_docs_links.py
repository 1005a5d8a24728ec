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
