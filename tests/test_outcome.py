"""Error classes from structured signals (fast, no lab)."""

from __future__ import annotations

import pytest

from harness.outcome import ErrorClass, Signals, classify, error_page


def signals(**changes) -> Signals:
    base = dict(
        exception=None,
        document_uri="https://example.lab.test/",
        on_load_ms=412.0,
        driver_failure=None,
        arm_problem=None,
        proof_valid=True,
        proof_reason="",
        har_problem=None,
    )
    return Signals(**{**base, **changes})


NETERROR = "about:neterror?e={}&u=https%3A//x.test/&c=UTF-8&d=We%20can%E2%80%99t%20connect"


@pytest.mark.parametrize(
    "uri, kind, code",
    [
        (NETERROR.format("dnsNotFound"), "neterror", "dnsNotFound"),
        ("about:certerror?e=nssBadCert&u=https%3A//badcert.lab.test/", "certerror", "nssBadCert"),
        ("about:neterror", "neterror", "unknown"),
    ],
)
def test_error_page_codes_come_from_the_uri_query(uri, kind, code):
    page = error_page(uri)
    assert page is not None and (page.kind, page.code) == (kind, code)


@pytest.mark.parametrize("uri", [None, "https://x.test/?e=dnsNotFound", "about:blank", "about:home"])
def test_pages_that_are_not_error_pages(uri):
    assert error_page(uri) is None


def test_successful():
    outcome = classify(signals())
    assert outcome.error_class is ErrorClass.SUCCESSFUL and outcome.counted
    assert outcome.paper_2019 == "Successful"


def test_dns_not_found_is_a_dns_error_in_both_taxonomies():
    outcome = classify(signals(exception="WebDriverException", document_uri=NETERROR.format("dnsNotFound")))
    assert (outcome.error_class, outcome.detail, outcome.paper_2019) == (
        ErrorClass.DNS_ERROR,
        "dnsNotFound",
        "DNS Error",
    )


def test_connection_failure_is_other_error_but_dns_error_in_paper_2019():
    outcome = classify(signals(exception="WebDriverException", document_uri=NETERROR.format("connectionFailure")))
    assert (outcome.error_class, outcome.detail) == (ErrorClass.OTHER_ERROR, "connectionFailure")
    assert outcome.paper_2019 == "DNS Error"


def test_certificate_error_page_is_other_error_with_its_code():
    outcome = classify(
        signals(
            exception="InsecureCertificateException", document_uri="about:certerror?e=nssBadCert&u=https%3A//b.test/"
        )
    )
    assert (outcome.error_class, outcome.detail) == (ErrorClass.OTHER_ERROR, "nssBadCert")


def test_timeout_and_selenium_errors():
    assert classify(signals(exception="TimeoutException", on_load_ms=None)).error_class is ErrorClass.PAGE_LOAD_TIMEOUT
    outcome = classify(signals(exception="InvalidArgumentException", document_uri="about:blank", on_load_ms=None))
    assert (outcome.error_class, outcome.detail) == (ErrorClass.SELENIUM_ERROR, "InvalidArgumentException")


def test_message_text_is_never_read():
    """A timeout whose message mentions DNS is still a timeout: only types and URIs count."""
    outcome = classify(signals(exception="TimeoutException", on_load_ms=None))
    assert outcome.error_class is ErrorClass.PAGE_LOAD_TIMEOUT


@pytest.mark.parametrize(
    "change, prefix",
    [
        (dict(driver_failure="start: SessionNotCreatedException: x"), "browser: "),
        (dict(arm_problem="the DoT stub (stubby) is not running"), "arm: "),
        (dict(proof_valid=False, proof_reason="the resolver received no dot query"), "arm-proof: "),
    ],
)
def test_harness_failures_are_never_charged_to_the_protocol(change, prefix):
    # Even when the page shows dnsNotFound, a dead stub or unproven arm is the harness's failure.
    outcome = classify(signals(exception="WebDriverException", document_uri=NETERROR.format("dnsNotFound"), **change))
    assert outcome.error_class is ErrorClass.INFRASTRUCTURE and not outcome.counted
    assert outcome.detail.startswith(prefix)
    assert outcome.page_class is ErrorClass.DNS_ERROR


def test_invalid_har_is_infrastructure_strictly_and_its_own_class_in_paper_2019():
    outcome = classify(signals(har_problem="haralyzer cannot read the HAR"))
    assert outcome.error_class is ErrorClass.INFRASTRUCTURE
    assert outcome.paper_2019 == "Invalid HAR"


def test_a_broken_link_is_infrastructure_whatever_the_page_did():
    outcome = classify(
        signals(link_problem="shaping daemon(s) not running: shaper-uplink", exception="TimeoutException")
    )
    assert outcome.error_class is ErrorClass.INFRASTRUCTURE and outcome.detail.startswith("link: ")
    assert not outcome.counted


# -- the transport's own failures on the path (docs/visit.md, "Who failed") --

DNS_TIMEOUT = dict(exception="TimeoutException", document_uri="about:blank", on_load_ms=None)


@pytest.mark.parametrize(
    "page",
    [dict(document_uri=NETERROR.format("dnsNotFound"), on_load_ms=None), DNS_TIMEOUT],
)
def test_a_path_failure_is_a_counted_dns_error_naming_its_cause(page):
    outcome = classify(signals(**page, proof_valid=False, proof_reason="no dot query", path_failure="dot:reset"))
    assert outcome.error_class is ErrorClass.DNS_ERROR and outcome.counted
    assert outcome.detail == "dot:reset"


@pytest.mark.parametrize(
    "change, prefix",
    [
        (dict(driver_failure="navigate: died"), "browser: "),
        (dict(link_problem="delayer-up died"), "link: "),
        (dict(place_problem="resolver-near not running"), "place: "),
        (dict(arm_problem="the DoT stub (stubby) is not running"), "arm: "),
        (dict(other_transport=True, proof_reason="3 packets counted on do53_other"), "arm-proof: "),
    ],
)
def test_our_own_failures_and_leaks_outrank_a_path_failure(change, prefix):
    """A dead stub, resolver or link, or queries that went another way: never the protocol's failure."""
    outcome = classify(
        signals(document_uri=NETERROR.format("dnsNotFound"), on_load_ms=None, path_failure="dot:timeout", **change)
    )
    assert outcome.error_class is ErrorClass.INFRASTRUCTURE and not outcome.counted
    assert outcome.detail.startswith(prefix)


def test_a_page_that_loaded_is_not_a_path_failure():
    outcome = classify(signals(path_failure="doh:reset"))
    assert outcome.error_class is ErrorClass.SUCCESSFUL
