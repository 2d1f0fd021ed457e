"""Profiles are validated at load, and errors name the file, the key and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.config import load_lab_config
from harness.lab.pageshape import load_page_shape

DEFAULT = Path(__file__).resolve().parent.parent / "profiles" / "lab" / "default.toml"


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = DEFAULT.read_text()
    assert old in text
    path = tmp_path / "lab.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_shipped_profiles_load():
    config = load_lab_config()
    assert [r.name for r in config.settings.resolvers] == ["near", "far"]
    shape = load_page_shape(config.settings.web.shape)
    assert shape.hostnames.median == 10 and shape.hostnames.max == 216


def test_unknown_key_names_file_key_and_line(tmp_path):
    path = _variant(tmp_path, "web_addresses = 32", "web_adresses = 32")
    with pytest.raises(HarnessError) as err:
        load_lab_config(path)
    message = str(err.value)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("web_adresses"))
    assert f"{path}:{line}: web_adresses: unknown key" in message
    assert "\n" not in message


def test_negative_rtt_refused_with_line(tmp_path):
    path = _variant(tmp_path, "upstream_rtt_ms = 40", "upstream_rtt_ms = -5")
    with pytest.raises(HarnessError) as err:
        load_lab_config(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "upstream_rtt_ms" in text)
    assert f":{line}: resolvers.1.upstream_rtt_ms:" in str(err.value)
    assert "-5" in str(err.value)


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('subnet = "198.18.0.0/23"', 'subnet = "198.18.0.0/24"', "subnet"),
        ('subnet = "198.18.0.0/23"', 'subnet = "not-a-net"', "subnet"),
        ('prefix = "dsl"', 'prefix = "Bad Prefix"', "prefix"),
        ("web_addresses = 32", "web_addresses = 0", "web_addresses"),
        ('name = "far"', 'name = "near"', "(top level)"),
    ],
)
def test_bad_values_refused(tmp_path, old, new, key):
    with pytest.raises(HarnessError) as err:
        load_lab_config(_variant(tmp_path, old, new))
    assert f": {key}:" in str(err.value)


def test_invalid_toml_names_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("prefix = \n")
    with pytest.raises(HarnessError, match="broken.toml: invalid TOML"):
        load_lab_config(path)


def test_missing_profile_is_one_line(tmp_path):
    with pytest.raises(HarnessError, match="cannot read profile"):
        load_lab_config(tmp_path / "nope.toml")


def test_page_shape_shares_must_sum_to_one(tmp_path):
    src = Path(__file__).resolve().parent.parent / "profiles" / "web" / "page-shape.toml"
    path = tmp_path / "shape.toml"
    path.write_text(src.read_text().replace("img = 0.55, js = 0.35", "img = 0.75, js = 0.35", 1))
    with pytest.raises(HarnessError, match="request_share must be non-negative and sum to 1"):
        load_page_shape(str(path))
