"""Error classes of a visit, decided from structured signals only.

Signals: the Selenium exception *type* of the navigation, the `e=` code of
Firefox's error page (about:neterror / about:certerror) in the document
URI, Chromium's `net::ERR_*` code of the navigation's request (its error
page, chrome-error://chromewebdata/, names none), whether the driver, browser, link or place failed, whether the DNS
arm was healthy and proven, how its transport failed on the path (from
the client's packet counters and the arm's own report), and whether the
HAR is valid. Exception messages are kept in the record but never searched.
The decision table is in docs/visit.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import parse_qs, urlsplit


class ErrorClass(StrEnum):
    SUCCESSFUL = "Successful"
    PAGE_LOAD_TIMEOUT = "Page-load Timeout"
    DNS_ERROR = "DNS Error"
    SELENIUM_ERROR = "Selenium Error"
    OTHER_ERROR = "Other Error"
    #: our stub, browser, driver or recorder failed: not the protocol's fault; the crawler retries it.
    INFRASTRUCTURE = "Infrastructure Failure"


#: The reference study's grouping (Hounsel et al. 2019): connection failures
#: counted as DNS errors, an unusable HAR as a class of its own.
PAPER_2019_INVALID_HAR = "Invalid HAR"


#: Chromium's net errors of a failed navigation (net/base/net_error_list.h) -> the class and the Firefox error
#: page code that says the same, so both browsers' failures read alike in both taxonomies (docs/visit.md has the
#: table). Codes not named here are Other Errors; ERR_DNS_* and ERR_NAME_* are DNS Errors.
NET_ERRORS: dict[str, str] = {
    "ERR_NAME_NOT_RESOLVED": "dnsNotFound",
    "ERR_NAME_RESOLUTION_FAILED": "dnsNotFound",
    "ERR_CONNECTION_REFUSED": "connectionFailure",
    "ERR_CONNECTION_TIMED_OUT": "netTimeout",
    "ERR_TIMED_OUT": "netTimeout",
    "ERR_CONNECTION_RESET": "netReset",
    "ERR_CONNECTION_CLOSED": "netInterrupt",
    "ERR_EMPTY_RESPONSE": "netInterrupt",
    "ERR_ADDRESS_UNREACHABLE": "connectionFailure",
    "ERR_CERT_AUTHORITY_INVALID": "nssBadCert",
    "ERR_CERT_COMMON_NAME_INVALID": "nssBadCert",
    "ERR_CERT_DATE_INVALID": "nssBadCert",
    "ERR_SSL_PROTOCOL_ERROR": "nssFailure2",
}


def net_error_code(net_error: str) -> str:
    """The Firefox error-page code a Chromium net error (``net::ERR_...`` or ``ERR_...``) says the same as."""
    name = net_error.removeprefix("net::")
    if name in NET_ERRORS:
        return NET_ERRORS[name]
    if name.startswith(("ERR_DNS_", "ERR_NAME_")):
        return "dnsNotFound"
    if name.startswith("ERR_CERT_"):
        return "nssBadCert"
    return "unknown"


@dataclass(frozen=True)
class ErrorPage:
    kind: str  # "neterror" or "certerror"
    code: str  # e.g. dnsNotFound, connectionFailure, nssBadCert


def error_page(document_uri: str | None) -> ErrorPage | None:
    """Parse Firefox's error-page URI (about:neterror?e=CODE&...)."""
    if not document_uri or not document_uri.startswith("about:"):
        return None
    parts = urlsplit(document_uri)
    kind = parts.path
    if kind not in ("neterror", "certerror"):
        return None
    code = parse_qs(parts.query).get("e", [""])[0]
    return ErrorPage(kind, code or "unknown")


@dataclass(frozen=True)
class Signals:
    """What a visit observed, as structured values."""

    exception: str | None  # Selenium exception class name
    document_uri: str | None
    on_load_ms: float | None
    driver_failure: str | None  # "start: ...", "navigate: ...", "watchdog: ..."
    arm_problem: str | None  # e.g. the stub was not running
    proof_valid: bool
    proof_reason: str
    har_problem: str | None
    link_problem: str | None = None  # the link emulation broke (a delayer died)
    place_problem: str | None = None  # a daemon of the place died (a lab resolver, the web)
    other_transport: bool = False  # the proof saw queries leave by another transport
    path_failure: str | None = None  # the transport failed on the path while our part was healthy, e.g. dot:reset
    net_error: str | None = None  # Chromium: the navigation request's net::ERR_* code


@dataclass(frozen=True)
class Outcome:
    error_class: ErrorClass
    detail: str  # e.g. dnsNotFound, nssBadCert, TimeoutException, arm-proof
    page_class: ErrorClass  # what the page alone showed, before harness checks
    paper_2019: str

    @property
    def counted(self) -> bool:
        """False for infrastructure failures: never a result about the protocol."""
        return self.error_class is not ErrorClass.INFRASTRUCTURE


def page_outcome(
    exception: str | None, document_uri: str | None, on_load_ms: float | None, net_error: str | None = None
) -> tuple[ErrorClass, str]:
    """The class the page's own signals give; the detail is Firefox's error-page code or Chromium's net error."""
    page = error_page(document_uri)
    if page is not None:
        if page.kind == "neterror" and page.code == "dnsNotFound":
            return ErrorClass.DNS_ERROR, page.code
        return ErrorClass.OTHER_ERROR, page.code  # certerror codes are TLS errors (nssBadCert, ...)
    if net_error is not None:
        dns = net_error_code(net_error) == "dnsNotFound"
        return (ErrorClass.DNS_ERROR if dns else ErrorClass.OTHER_ERROR), net_error
    if exception == "TimeoutException":
        return ErrorClass.PAGE_LOAD_TIMEOUT, exception
    if exception == "InsecureCertificateException":
        return ErrorClass.OTHER_ERROR, "insecureCertificate"
    if exception is not None:
        return ErrorClass.SELENIUM_ERROR, exception
    if on_load_ms is None:
        return ErrorClass.SELENIUM_ERROR, "noNavigationTiming"
    return ErrorClass.SUCCESSFUL, ""


def classify(signals: Signals) -> Outcome:
    """Strict class (harness failures apart) and the paper-2019 class of one visit."""
    page_class, page_detail = page_outcome(
        signals.exception, signals.document_uri, signals.on_load_ms, signals.net_error
    )
    if signals.driver_failure:
        cls, detail = ErrorClass.INFRASTRUCTURE, "browser: " + signals.driver_failure
    elif signals.link_problem:
        cls, detail = ErrorClass.INFRASTRUCTURE, "link: " + signals.link_problem
    elif signals.place_problem:
        cls, detail = ErrorClass.INFRASTRUCTURE, "place: " + signals.place_problem
    elif signals.arm_problem:
        cls, detail = ErrorClass.INFRASTRUCTURE, "arm: " + signals.arm_problem
    elif signals.other_transport:
        cls, detail = ErrorClass.INFRASTRUCTURE, "arm-proof: " + signals.proof_reason
    elif signals.path_failure and page_class is not ErrorClass.SUCCESSFUL:
        # The protocol's own failure on the path: counted, like any DNS failure a user meets.
        cls, detail = ErrorClass.DNS_ERROR, signals.path_failure
    elif not signals.proof_valid:
        cls, detail = ErrorClass.INFRASTRUCTURE, "arm-proof: " + signals.proof_reason
    elif page_class is ErrorClass.SUCCESSFUL and signals.har_problem:
        cls, detail = ErrorClass.INFRASTRUCTURE, "har: " + signals.har_problem
    else:
        cls, detail = page_class, page_detail
    return Outcome(cls, detail, page_class, paper_2019_class(cls, detail, page_class, signals.har_problem))


def paper_2019_class(cls: ErrorClass, detail: str, page_class: ErrorClass, har_problem: str | None) -> str:
    """The reference study's class for the same visit."""
    if (
        page_class is ErrorClass.SUCCESSFUL
        and har_problem
        and cls is ErrorClass.INFRASTRUCTURE
        and detail.startswith("har: ")
    ):
        return PAPER_2019_INVALID_HAR
    if cls is ErrorClass.OTHER_ERROR and "connectionFailure" in (detail, net_error_code(detail)):
        return ErrorClass.DNS_ERROR.value
    return cls.value
