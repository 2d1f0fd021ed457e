"""The report's figures: PNG and PDF under its `figures/` directory, the PNG inlined in report.html.

A figure drawn in a worker (analysis/drawing.py) stands in the page as a placeholder until `fill` puts it
in its place, so the report goes on while the grids are drawn.
"""

from __future__ import annotations

import base64
import html
from concurrent.futures import Future
from pathlib import Path

import matplotlib.pyplot as plt

from analysis.drawing import Drawings, Rendered, render


class ReportFigures:
    """Figures saved under ``directory``, in the order the page shows them; `paths` lists the files written."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.paths: list[Path] = []
        self.drawings = Drawings()
        self._pending: dict[str, tuple[Future[Rendered], str, str]] = {}

    def now(self, fig: plt.Figure, name: str, caption: str) -> str:
        """Save ``fig`` (and close it); its HTML, the PNG inline (self-contained: no file references)."""
        return self._saved(render(lambda: fig, (), pdf=True), name, caption)

    def later(self, draw, *args, name: str, caption: str) -> str:
        """Draw ``draw(*args)`` in a worker; a placeholder for it, which `fill` replaces."""
        placeholder = f"<!-- figure {len(self._pending)}: {html.escape(name)} -->"
        self._pending[placeholder] = (self.drawings.submit(draw, *args), name, caption)
        return placeholder

    def fill(self, page: str) -> str:
        """The page with every figure drawn in a worker saved and in its place."""
        for placeholder, (drawing, name, caption) in self._pending.items():
            page = page.replace(placeholder, self._saved(drawing.result(), name, caption))
        self._pending.clear()
        return page

    def close(self) -> None:
        """End the workers (after `fill`, or when the report failed)."""
        self.drawings.close()

    def __enter__(self) -> ReportFigures:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _saved(self, rendered: Rendered, name: str, caption: str) -> str:
        png, pdf = self.directory / f"{name}.png", self.directory / f"{name}.pdf"
        png.write_bytes(rendered.png)
        assert rendered.pdf is not None  # the report's figures are all drawn with their PDF
        pdf.write_bytes(rendered.pdf)
        self.paths += [png, pdf]
        data = base64.b64encode(rendered.png).decode("ascii")
        return (
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)} ({png.name}, {pdf.name})</figcaption></figure>"
        )
