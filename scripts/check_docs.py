#!/usr/bin/env python3
"""scripts/check_docs.py: checks README.md and docs/ against the tree. Python 3 standard library.

- README.md is at most 200 lines.
- Every relative link in README.md and docs/**/*.md names a file or folder that exists, and a
  #fragment names a heading of the linked Markdown file (GitHub's anchors).
- Every code line of the README's greeter (its proto, cmake and cpp blocks) appears in
  examples/greeter: lines that are only a comment are skipped, whitespace is ignored.

Usage: python3 scripts/check_docs.py [--allow-missing PATH ...]   (from anywhere)
Exits 1 and says what is wrong when a check fails.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files():
    yield os.path.join(ROOT, "README.md")
    for base, _, files in os.walk(os.path.join(ROOT, "docs")):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(base, name)


def strip_code(text):
    """The text without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    """GitHub's heading anchors of a Markdown file."""
    seen, out = {}, set()
    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = m.group(1).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", slug).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def check_links(allowed):
    errors = []
    for md in markdown_files():
        for target in LINK.findall(strip_code(open(md, encoding="utf-8").read())):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, fragment = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            rel = os.path.relpath(resolved, ROOT)
            where = os.path.relpath(md, ROOT)
            if not os.path.exists(resolved):
                if rel.rstrip("/") not in allowed:
                    errors.append(f"{where}: link to missing {rel}")
                continue
            if fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                errors.append(f"{where}: no heading #{fragment} in {rel}")
    return errors


def check_greeter():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme.split("## A greeter", 1)[1].split("\n## ", 1)[0]
    example_dir = os.path.join(ROOT, "examples", "greeter")
    example_lines = set()
    for name in os.listdir(example_dir):
        for line in open(os.path.join(example_dir, name), encoding="utf-8"):
            example_lines.add("".join(line.split()))
    errors = []
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", section, flags=re.S | re.M)
    if not blocks:
        errors.append("README.md: no code blocks under '## A greeter'")
    for _, body in blocks:
        for line in body.splitlines():
            code = "".join(line.split())
            if not code or code.startswith("//") or code.startswith("#"):
                continue
            if code not in example_lines:
                errors.append(f"README.md greeter: not in examples/greeter: {line.strip()}")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-missing", action="append", default=[], metavar="PATH",
                        help="a linked path (relative to the repository) that may not exist yet")
    args = parser.parse_args()
    allowed = {p.rstrip("/") for p in args.allow_missing}

    errors = []
    readme_lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().count("\n")
    if readme_lines > 200:
        errors.append(f"README.md: {readme_lines} lines, more than 200")
    errors += check_links(allowed)
    errors += check_greeter()
    for e in errors:
        print(e)
    print(f"check_docs: README.md {readme_lines} lines; {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
