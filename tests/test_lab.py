"""The lab, for real: daemons in namespaces, queried with dig, kdig, getdns_query and curl."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from harness.lab.zones import web_address
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF
from tests.helpers import dig_ms, dns_query_file, doh_get_param, in_ns, median

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def client(lab):
    return lab.config.namespaces["client"]


@pytest.fixture(scope="module")
def resolvers(lab):
    return {r["name"]: r for r in lab.status().resolvers}


def test_lab_is_healthy(lab):
    status = lab.status()
    assert status.healthy, status
    names = {d["name"] for d in status.daemons}
    assert {"auth", "delayer-far", "resolver-near", "resolver-far", "nginx", "tarpit"} <= names


def test_the_client_namespace_has_its_own_hosts_file(lab, client):
    """This host's name resolves without DNS (Firefox looks it up), and none of the host's other entries leak in."""
    import socket

    host = socket.gethostname()
    inside = in_ns(client, "getent", "ahosts", host)
    assert inside.returncode == 0 and inside.stdout.split()[0] in ("127.0.1.1", "127.0.0.1", "::1"), inside.stdout
    own = {line.split()[1] for line in in_ns(client, "cat", "/etc/hosts").stdout.splitlines() if line[:1].isdigit()}
    assert own <= {"localhost", host}
    leaked = [line.split() for line in Path("/etc/hosts").read_text().splitlines() if line[:1].isdigit()]
    for _address, *names in leaked:
        for name in set(names) - own:  # the host's own entries (a registry mirror here): unknown inside
            assert in_ns(client, "getent", "-s", "files", "hosts", name).returncode != 0, name


def test_up_twice_is_a_noop(lab):
    pids = {d["name"]: d["pid"] for d in lab.status().daemons}
    assert lab.up() is False
    assert {d["name"]: d["pid"] for d in lab.status().daemons} == pids


@pytest.mark.parametrize("transport", ["udp", "tcp"])
@pytest.mark.parametrize("resolver", ["near", "far"])
def test_do53(lab, client, resolvers, resolver, transport):
    flag = "+tcp" if transport == "tcp" else "+notcp"
    out = in_ns(client, "dig", flag, "+tries=1", f"@{resolvers[resolver]['address']}", "google.com", "A")
    assert "status: NOERROR" in out.stdout
    assert web_address(lab.config, "google.com") in out.stdout
    # dig prints the transport it used in its footer
    assert f"({transport.upper()})" in out.stdout


@pytest.mark.parametrize("resolver", ["near", "far"])
def test_dot_verifies_against_lab_ca(lab, client, resolvers, resolver):
    r = resolvers[resolver]
    ok = in_ns(
        client,
        "kdig",
        "+tls",
        f"+tls-ca={lab.ca_path}",
        f"+tls-hostname={r['tls_name']}",
        f"@{r['address']}",
        "youtube.com",
        "A",
    )
    assert "status: NOERROR" in ok.stdout, ok.stdout + ok.stderr
    assert web_address(lab.config, "youtube.com") in ok.stdout
    assert "(TLS1.3)" in ok.stdout
    wrong = in_ns(
        client,
        "kdig",
        "+tls",
        f"+tls-ca={lab.ca_path}",
        "+tls-hostname=wrong.dns.lab.test",
        f"@{r['address']}",
        "youtube.com",
        "A",
    )
    assert "status: NOERROR" not in wrong.stdout
    assert "failed" in (wrong.stdout + wrong.stderr).lower()
    # and without the lab CA the system trust store rejects it too
    untrusted = in_ns(client, "kdig", "+tls-ca", f"+tls-hostname={r['tls_name']}", f"@{r['address']}", "youtube.com")
    assert "status: NOERROR" not in untrusted.stdout


def test_dot_with_getdns_query(lab, client, resolvers, tmp_path):
    r = resolvers["near"]
    conf = tmp_path / "ca.json"
    conf.write_text(json.dumps({"tls_ca_file": str(lab.ca_path)}))
    out = in_ns(
        client,
        "getdns_query",
        "-C",
        str(conf),
        "-s",
        "-L",
        "-m",
        f"@{r['address']}#853~{r['tls_name']}",
        "+return_call_reporting",
        "-j",
        "bing.com",
        "A",
    )
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["replies_tree"][0]["header"]["rcode"] == 0
    assert reply["call_reporting"][0]["transport"] == 1202  # GETDNS_TRANSPORT_TLS
    assert reply["call_reporting"][0]["tls_auth_status"] == "Success"


@pytest.mark.parametrize("resolver", ["near", "far"])
def test_doh_post_and_get_over_http2(lab, client, resolvers, resolver, tmp_path):
    r = resolvers[resolver]
    query = dns_query_file(tmp_path, "amazon.com")
    answer = tmp_path / "answer.bin"
    post = in_ns(
        client,
        "curl",
        "-sS",
        "--http2",
        "--cacert",
        str(lab.ca_path),
        "-o",
        str(answer),
        "-w",
        "%{http_version} %{http_code}",
        "-H",
        "content-type: application/dns-message",
        "--data-binary",
        f"@{query}",
        r["doh"],
    )
    assert post.stdout == "2 200", post.stdout + post.stderr
    import dns.message

    msg = dns.message.from_wire(answer.read_bytes())
    assert msg.answer[0][0].address == web_address(lab.config, "amazon.com")
    get = in_ns(
        client,
        "curl",
        "-sS",
        "--http2",
        "--cacert",
        str(lab.ca_path),
        "-o",
        str(answer),
        "-w",
        "%{http_version} %{http_code}",
        "-H",
        "accept: application/dns-message",
        f"{r['doh']}?dns={doh_get_param('amazon.com')}",
    )
    assert get.stdout == "2 200", get.stdout + get.stderr
    assert dns.message.from_wire(answer.read_bytes()).answer[0][0].address == web_address(lab.config, "amazon.com")


def test_https_over_http2_for_several_hostnames(lab, client):
    manifest = json.loads((Path(lab._web_root()) / "manifest.json").read_text())
    top, tail = manifest["pages"][3], manifest["pages"][1500]
    urls = [top["url"], tail["url"], f"https://{top['hostnames'][-1]}/o/img/256.png?x=1", "https://www.lab.test/"]
    for url in urls:
        out = in_ns(
            client,
            "curl",
            "-sS",
            "--http2",
            "--cacert",
            str(lab.ca_path),
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code} %{remote_ip}",
            url,
        )
        assert out.stdout.startswith("2 200 198.18."), (url, out.stdout, out.stderr)
    # the page references its objects on many hostnames
    page = in_ns(client, "curl", "-sS", "--cacert", str(lab.ca_path), top["url"]).stdout
    hosts = set(re.findall(r"https://([a-z0-9.-]+)/", page))
    assert len(hosts) >= len(top["hostnames"]) - len(top["late_hostnames"]) - 1
    # without the lab CA, curl's system trust store rejects the lab's certificates
    bad = in_ns(client, "curl", "-sS", "-o", "/dev/null", top["url"])
    assert bad.returncode == 60, bad.stderr


def test_untrusted_and_dead_servers_behave(lab, client):
    badcert = in_ns(client, "curl", "-sS", "--cacert", str(lab.ca_path), "-o", "/dev/null", "https://badcert.lab.test/")
    assert badcert.returncode == 60  # certificate problem
    refused = in_ns(client, "curl", "-sS", "-o", "/dev/null", "https://refused.lab.test/")
    assert refused.returncode == 7  # could not connect
    start = time.monotonic()
    hang = in_ns(
        client, "curl", "-sS", "-m", "2", "--cacert", str(lab.ca_path), "-o", "/dev/null", "https://hang.lab.test/"
    )
    assert hang.returncode == 28 and time.monotonic() - start >= 1.9  # connected, then silence until timeout


def test_names_outside_the_lab_get_nxdomain_from_the_lab(lab, client, resolvers):
    name = f"outside-{os.getpid()}.example-not-in-lab.com"
    for r in resolvers.values():
        out = in_ns(client, "dig", "+tries=1", f"@{r['address']}", name)
        assert "status: NXDOMAIN" in out.stdout
    # the system resolver of the client namespace is the lab's, and it says NXDOMAIN
    out = in_ns(client, "getent", "ahostsv4", name)
    assert out.returncode == 2
    log = (Path(lab.run_dir) / "logs" / "resolver-near.log").read_text()
    assert f"{name}. A IN" in log or f"{name}. A" in log


def test_client_cannot_reach_beyond_the_lab(lab, client):
    # The client's default route ends at the shaper (Firefox needs one to call its link up: docs/lab.md),
    # which routes only the lab's subnets and has no link but the lab's two.
    plan = lab.config.addresses
    lab_nets = {str(plan.client_net), str(plan.server_net)}
    routes = [line.strip() for line in in_ns(client, "ip", "-4", "route").stdout.strip().splitlines()]
    default = f"default via {plan.shaper_client_side} dev {CLIENT_IF} proto static"
    assert all(line.split()[0] in lab_nets for line in routes if line != default) and default in routes, routes
    shaper = lab.config.namespaces["shaper"]
    shaper_routes = in_ns(shaper, "ip", "-4", "route").stdout.strip().splitlines()
    assert shaper_routes and all(line.split()[0] in lab_nets for line in shaper_routes), shaper_routes
    links = {line.split(":")[1].strip().split("@")[0] for line in in_ns(shaper, "ip", "-o", "link").stdout.splitlines()}
    assert links == {"lo", SHAPER_CLIENT_IF, SHAPER_SERVER_IF}, links
    start = time.monotonic()
    out = in_ns(client, "curl", "-sS", "-m", "5", "http://192.0.2.1/")  # TEST-NET-1: dies at the shaper
    assert out.returncode == 7 and time.monotonic() - start < 2  # unreachable at once, not timed out
    resolv = in_ns(client, "cat", "/etc/resolv.conf").stdout
    assert f"nameserver {lab.config.addresses.resolver(0)}" in resolv


def test_resolvers_differ_as_documented(lab, client, resolvers):
    """far pays one upstream round trip per query (cold cache); near answers locally."""
    rtt = lab.config.settings.resolvers[1].upstream_rtt_ms
    names = ["netflix.com", "reddit.com", "apple.com", "adobe.com", "yelp.com"] * 2
    near = [dig_ms(client, resolvers["near"]["address"], n) for n in names]
    far = [dig_ms(client, resolvers["far"]["address"], n) for n in names]
    # The same names asked twice stay slow at far: nothing is cached.
    assert median(far) - median(near) >= 0.75 * rtt, (near, far)
    assert median(far[5:]) - median(near[5:]) >= 0.75 * rtt


def test_dead_delayer_is_detected(private_lab):
    """Killing the delayer silences far's upstream (no bypass) and status reports it dead."""
    other = private_lab()
    client = other.config.namespaces["client"]
    far = other.config.addresses.resolver(1)
    delayer = next(d for d in other.status().daemons if d["name"] == "delayer-far")
    os.kill(delayer["pid"], signal.SIGKILL)
    time.sleep(0.2)
    out = in_ns(client, "dig", "+tries=1", "+time=4", f"@{far}", "wikipedia.org")
    assert "status: NOERROR" not in out.stdout
    status = other.status()
    assert "delayer-far" in status.dead and not status.healthy


def test_first_dot_query_is_not_held_by_nagle(lab, client, resolvers):
    """unbound without TLS 1.3 session tickets: no 40 ms delayed-ACK stall on a new DoT connection.

    With tickets, kdig saw 40-50 ms for a query whose handshake and answer
    take about 2 ms; the stall would be billed to DoT in every comparison.
    """
    times = []
    for _ in range(5):
        out = in_ns(
            client,
            "kdig",
            "+tls",
            f"+tls-ca={lab.ca_path}",
            f"+tls-hostname={resolvers['near']['tls_name']}",
            f"@{resolvers['near']['address']}",
            "google.com",
        )
        found = re.search(r"in ([0-9.]+) ms", out.stdout)
        assert found is not None, out.stdout
        times.append(float(found.group(1)))
    assert median(times) < 20, times


def test_status_command_reports_daemons_addresses_and_deaths(lab):
    import subprocess
    import sys

    args = [
        sys.executable,
        "-m",
        "harness.cli",
        "lab",
        "status",
        "--json",
        "--prefix",
        lab.config.prefix,
        "--subnet",
        lab.config.settings.subnet,
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["healthy"] and status["dead"] == []
    daemons = {d["name"]: d for d in status["daemons"]}
    near = lab.config.addresses.resolver(0)
    assert daemons["resolver-near"]["alive"]
    assert daemons["resolver-near"]["addresses"] == [f"{near}:53", f"{near}:853", f"{near}:443"]
    assert {r["name"] for r in status["resolvers"]} == {"near", "far"}
    # the table form, for people
    table = subprocess.run(args[:-5] + args[-4:], capture_output=True, text=True, env=env, timeout=30)
    assert table.returncode == 0 and "resolver-near" in table.stdout and "running" in table.stdout


def test_lab_up_runs_no_code_from_the_working_directory(private_lab, tmp_path):
    """`dnsstudy lab up` run as root from a directory holding a `harness/` package never imports it.

    The tarpit and the checks are Python helpers the lab starts as root; started with `python -m`, the
    working directory came first on sys.path and a planted `harness/lab/tarpit.py` ran instead.
    """
    import subprocess
    import sys

    the_lab = private_lab(up=False)
    marker = tmp_path / "planted-code-ran"
    work = tmp_path / "work"
    planted = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for module in ("__init__.py", "lab/__init__.py", "lab/tarpit.py", "lab/checks.py", "cli/__init__.py"):
        (work / "harness" / module).parent.mkdir(parents=True, exist_ok=True)
        (work / "harness" / module).write_text(planted)
    dnsstudy = str(Path(sys.executable).parent / "dnsstudy")
    lab_args = ["--prefix", the_lab.config.prefix, "--subnet", the_lab.config.settings.subnet]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    up = subprocess.run(
        [dnsstudy, "lab", "up", *lab_args], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert not marker.exists(), marker.read_text()
    assert up.returncode == 0, up.stdout + up.stderr
    status = the_lab.status()
    assert status.healthy and "tarpit" in {d["name"] for d in status.daemons}, status
    down = subprocess.run(
        [dnsstudy, "lab", "down", *lab_args], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert down.returncode == 0, down.stdout + down.stderr
    assert not marker.exists(), marker.read_text()


def test_resolver_statistics_read_on_the_control_socket_match_unbound_control(lab, client, resolvers, tmp_path):
    """The proof reads unbound's statistics on its control socket (harness/arms/evidence.py); the counts are
    unbound-control's, a query is counted at once, and a config naming no live socket is a one-line error."""
    import subprocess

    from harness.arms.evidence import resolver_counters
    from harness.errors import HarnessError

    control = lab.resolver("near").control_config
    before = resolver_counters(control)
    in_ns(client, "dig", "+notcp", "+tries=1", f"@{resolvers['near']['address']}", "google.com", "A")
    after = resolver_counters(control)
    assert after["do53_udp"] == before["do53_udp"] + 1 and after["dot"] == before["dot"]
    printed = subprocess.run(["unbound-control", "-c", str(control), "stats_noreset"], capture_output=True, text=True)
    total = next(line for line in printed.stdout.splitlines() if line.startswith("total.num.queries="))
    assert int(total.split("=")[1]) == sum(after.values())
    gone = tmp_path / "resolver-gone.conf"
    gone.write_text(f"remote-control:\n  control-interface: {tmp_path / 'gone.ctl'}\n")
    with pytest.raises(HarnessError, match=r"cannot read resolver statistics \(.*gone\.ctl\)"):
        resolver_counters(gone)
    (tmp_path / "none.conf").write_text("server:\n  interface: 127.0.0.1\n")
    with pytest.raises(HarnessError, match="none.conf: no control-interface"):
        resolver_counters(tmp_path / "none.conf")
