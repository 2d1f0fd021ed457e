"""The crawl plan: every visit of a study, in the order it will run, fixed before anything runs.

Order, as in the reference study and in network blocks: for each round,
the networks (shuffled per round) form blocks, so a link is shaped once
per block; within a block the sites are shuffled, and for each site its
configurations (browser x resolver x protocol) are shuffled. Everything is
drawn from one seed, so the same study always gives the same plan; a study
with one browser plans exactly as before browsers were a factor (the same
number of configurations per site, so the same shuffles).

A study of reused browsers runs them apart (`browsers_apart`): within a
block each browser in turn (their order shuffled per block), and within a
browser's part each launch group in turn (`launch_group`: the
configurations one running browser can serve; Chromium's DNS is fixed at
its launch), each over every site, a site's configurations in the group
shuffled. So two browsers never run at once in one client namespace (an
idle browser's own lookups would fall into the other's counted window),
and a reused browser serves a run of visits, not one visit per start. The
cost: a site's configurations in different groups are visited further
apart in time (within the block).

A study with several vantage points repeats the same sequence at each, so
a site is visited from every vantage point at about the same time; the
plan lists them one vantage point after the other (ordinals and blocks
count on across them), and each vantage point runs its own part in order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from harness.sitelist import Site


@dataclass(frozen=True)
class PlannedVisit:
    """One visit to run: its place in the plan and its configuration."""

    ordinal: int  # position in the plan: visits run in this order
    round: int
    block: int  # consecutive visits on one network share a block
    network: str
    site: Site
    resolver: str
    protocol: str
    vantage_point: str = ""  # "" in a single-host study
    browser: str = "firefox"  # the browser the visit runs in (harness/browser/registry.py)

    @property
    def url(self) -> str:
        return f"https://{self.site.domain}/"


def _rng(seed: int, *key: object) -> random.Random:
    # A string seed is hashed with SHA-512 by `random`, so it is stable across runs and Python versions.
    return random.Random("/".join(map(str, (seed, *key))))


def make_plan(
    sites: Sequence[Site],
    rounds: int,
    networks: Sequence[str],
    configurations: Sequence[tuple[str, str]],
    seed: int,
    vantage_points: Sequence[str] = ("",),
    first_ordinal: int = 0,
    first_block: int = 0,
    browsers: Sequence[str] = ("firefox",),
    browsers_apart: bool = False,
    launch_group: Callable[[str, str, str], str] | None = None,
) -> Iterator[PlannedVisit]:
    """Every visit of the study, in run order (a generator: a 100,000-visit plan is never held twice).

    ``configurations`` are the (resolver, protocol) pairs each site is visited with, in each of ``browsers``
    (crossed with them and shuffled together per site, as resolvers and protocols are). A vantage point added
    to a running study gets its part after the others: ``first_ordinal`` and ``first_block`` continue them.
    ``browsers_apart``: each block runs its browsers one after the other, not shuffled together (reused browsers),
    and each browser's launch groups (``launch_group(browser, resolver, protocol)``; None: one group) in turn.
    """
    blocks = rounds * len(networks)
    crossed = [(b, r, p) for b in browsers for r, p in configurations]
    visits = blocks * len(sites) * len(crossed)
    for index, place in enumerate(vantage_points):
        ordinal, block = first_ordinal + index * visits, first_block + index * blocks
        groups = launch_group if browsers_apart else None
        for visit in _one_place(sites, rounds, networks, crossed, seed, browsers_apart, groups):
            yield replace(visit, ordinal=ordinal + visit.ordinal, block=block + visit.block, vantage_point=place)


def _one_place(
    sites: Sequence[Site],
    rounds: int,
    networks: Sequence[str],
    configurations: Sequence[tuple[str, str, str]],
    seed: int,
    browsers_apart: bool = False,
    launch_group: Callable[[str, str, str], str] | None = None,
) -> Iterator[PlannedVisit]:
    """The plan of one vantage point, ordinals and blocks from 0; ``configurations`` are (browser, resolver,
    protocol)."""
    ordinal = block = 0
    for round_ in range(rounds):
        order = list(networks)
        _rng(seed, "networks", round_).shuffle(order)
        for network in order:
            rng = _rng(seed, "browsers", round_, network)
            for key, part in _block_parts(configurations, browsers_apart, rng, launch_group):
                shuffled = list(sites)
                _rng(seed, "sites", round_, network, *key).shuffle(shuffled)
                for site in shuffled:
                    configs = list(part)
                    _rng(seed, "configs", round_, network, site.domain, *key).shuffle(configs)
                    for browser, resolver, protocol in configs:
                        yield PlannedVisit(ordinal, round_, block, network, site, resolver, protocol, browser=browser)
                        ordinal += 1
            block += 1


def _block_parts(
    configurations: Sequence[tuple[str, str, str]],
    apart: bool,
    rng: random.Random,
    launch_group: Callable[[str, str, str], str] | None = None,
) -> list[tuple[tuple[str, ...], list[tuple[str, str, str]]]]:
    """The parts of a block, each over every site: one of all configurations (its key empty, so the shuffles are
    those of a plan before browsers were apart), or one per browser and launch group, in an order drawn from
    ``rng`` (browsers first, then each browser's groups)."""
    browsers = list(dict.fromkeys(b for b, _, _ in configurations))
    grouped = launch_group is not None and len({launch_group(*c) for c in configurations}) > 1
    if not apart or (len(browsers) < 2 and not grouped):
        return [((), list(configurations))]
    rng.shuffle(browsers)
    parts: list[tuple[tuple[str, ...], list[tuple[str, str, str]]]] = []
    for browser in browsers:
        mine = [c for c in configurations if c[0] == browser]
        groups = list(dict.fromkeys(launch_group(*c) if launch_group else "" for c in mine))
        rng.shuffle(groups)
        for group in groups:
            part = [c for c in mine if (launch_group(*c) if launch_group else "") == group]
            parts.append(((browser, group) if group else (browser,), part))
    return parts
