"""Helpers shared by the benchmark scripts: machine description and the sectioned RESULTS.md."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"


def update_markdown(path: Path, section: str, start: str, end: str) -> None:
    """Replace the ``start``..``end`` section of ``path`` (created with a heading if missing), leaving the rest."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)
