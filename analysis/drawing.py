"""Figures drawn in worker processes while the report goes on.

A pairwise grid of ten configurations is a hundred axes: laying it out and
rendering it takes about 2.8 s on this machine's cores, and a report draws
one per network and metric, each independent of the others. `Drawings`
hands each to a forked worker (one per core the process may use) and
returns PNG and PDF bytes; with one core it draws in the caller.
"""

from __future__ import annotations

import io
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import matplotlib.pyplot as plt

#: The resolution every PNG figure is saved at (the report and the benchmarks alike).
PNG_DPI = 110


@dataclass(frozen=True)
class Rendered:
    """A figure saved as PNG and, when asked for, PDF."""

    png: bytes
    pdf: bytes | None


def render(draw: Callable[..., plt.Figure], args: tuple, pdf: bool) -> Rendered:
    """Draw ``draw(*args)`` and save it; the figure is closed before returning."""
    fig = draw(*args)
    try:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=PNG_DPI)
        doc = None
        if pdf:
            buffer = io.BytesIO()
            fig.savefig(buffer, format="pdf")
            doc = buffer.getvalue()
        return Rendered(png.getvalue(), doc)
    finally:
        plt.close(fig)


class Drawings:
    """Draw figures side by side: `submit` returns a future of their bytes; `close` waits for all of them.

    Workers are forked, so a drawing function and its arguments must pickle (figures.grid_figure and its
    cells do); what is already in memory is not copied until written.
    """

    def __init__(self, workers: int | None = None):
        self.workers = workers if workers is not None else len(os.sched_getaffinity(0))
        self._pool: ProcessPoolExecutor | None = None

    def submit(self, draw: Callable[..., plt.Figure], *args, pdf: bool = True) -> Future[Rendered]:
        """Draw in a worker (in the caller when there is one core)."""
        if self.workers < 2:
            done: Future[Rendered] = Future()
            done.set_result(render(draw, args, pdf))
            return done
        if self._pool is None:
            context = multiprocessing.get_context("fork")
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        return self._pool.submit(render, draw, args, pdf)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> Drawings:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
