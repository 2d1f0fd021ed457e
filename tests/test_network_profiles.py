"""Network profiles: the shipped ones carry the reference figures; mistakes are refused by file and key."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.shaping.profile import available_profiles, load_link_profile

REFERENCE = {  # Hounsel et al. 2019: added delay, jitter, loss, rate up, rate down
    "4g": (53.3, 1.0, 0.5, 7.44, 22.1),
    "4g-lossy": (53.3, 1.0, 1.5, 7.44, 22.1),
    "3g": (150.0, 8.0, 2.1, 1.0, 1.0),
}


def test_shipped_profiles():
    assert {"wired", "4g", "4g-lossy", "3g", "4g-symmetric", "4g-lossy-symmetric", "3g-symmetric"} <= set(
        available_profiles()
    )
    assert not load_link_profile("wired").shaped


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_links_shape_the_clients_egress_only(name):
    delay, jitter, loss, up, down = REFERENCE[name]
    p = load_link_profile(name)
    assert (p.uplink.delay_ms, p.uplink.jitter_ms, p.uplink.loss_percent, p.uplink.rate_mbit) == (
        delay,
        jitter,
        loss,
        up,
    )
    assert (p.downlink.delay_ms, p.downlink.jitter_ms, p.downlink.loss_percent, p.downlink.rate_mbit) == (0, 0, 0, down)
    assert "Hounsel" in p.source


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_symmetric_variants_keep_the_round_trip(name):
    reference, symmetric = load_link_profile(name), load_link_profile(f"{name}-symmetric")
    assert symmetric.uplink.delay_ms == symmetric.downlink.delay_ms > 0
    assert symmetric.uplink.loss_percent == symmetric.downlink.loss_percent > 0
    for key, value in reference.round_trip().items():
        assert symmetric.round_trip()[key] == pytest.approx(value, abs=0.002)


@pytest.mark.parametrize(
    "body, key",
    [
        ("[uplink]\ndelay_ms = -1\n", "uplink.delay_ms"),
        ("[uplink]\nloss_percent = 101\n", "uplink.loss_percent"),
        ("[downlink]\nrate_mbit = 0\n", "downlink.rate_mbit"),
        ("[downlink]\nlatency_ms = 3\n", "downlink.latency_ms"),
        ("colour = 'red'\n", "colour"),
    ],
)
def test_impossible_values_and_unknown_keys_are_refused_by_file_and_key(tmp_path, body, key):
    path = tmp_path / "mine.toml"
    path.write_text('description = "x"\nsource = "y"\n' + body)
    with pytest.raises(HarnessError, match=rf"mine\.toml:\d+: {key}"):
        load_link_profile(str(path))


def test_unknown_profile_name_lists_the_known_ones():
    with pytest.raises(HarnessError, match="no network profile '5g'.*4g"):
        load_link_profile("5g")
