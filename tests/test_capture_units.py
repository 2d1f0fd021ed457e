"""The capture helper's parsing of `tcpdump -r -n -tt` text (harness/capture.py). No network, no tcpdump.

The lines are real: captured in a lab's client namespace with `-i any`
(the interface name is the one the reading side knows by that index).
"""

from __future__ import annotations

from harness.capture import (
    MARKER_END,
    MARKER_START,
    Exchange,
    capture_bpf,
    do53_durations,
    dropped_by_kernel,
    exchanges_from_lines,
    is_marker,
)

START = "1795413065.956993 lo    In  IP 127.0.0.1.50682 > 127.0.0.1.47853: UDP, length 23"
END = "1795413066.013868 lo    In  IP 127.0.0.1.50682 > 127.0.0.1.47854: UDP, length 23"

DO53 = [
    START,
    "1795413066.007113 ifb0  Out IP 198.18.96.2.40734 > 198.18.97.53.53: 51564+ [1au] A? www.lab.test. (41)",
    "1795413066.007364 ifb0  In  IP 198.18.97.53.53 > 198.18.96.2.40734: 51564* 1/0/1 A 198.18.97.100 (57)",
    "1795413066.008377 ifb0  Out IP 198.18.96.2.44824 > 198.18.97.53.53: 17311+ [1au] A? no-such-host.lab.test. (50)",
    "1795413066.008449 ifb0  In  IP 198.18.97.53.53 > 198.18.96.2.44824: 17311 NXDomain* 0/0/1 (50)",
    "1795413066.009095 ifb0  Out IP 198.18.96.2.33280 > 198.18.97.53.53: 26481+ [1au] AAAA? www.google.com. (43)",
    "1795413066.009177 ifb0  In  IP 198.18.97.53.53 > 198.18.96.2.33280: 26481* 0/0/1 (43)",
    "1795413066.009304 ifb0  Out IP 198.18.96.2.42868 > 198.18.97.53.53: 47969+ [1au] TXT? big.lab.test. (41)",
    "1795413066.009360 ifb0  In  IP 198.18.97.53.53 > 198.18.96.2.42868: 47969*| 0/0/1 (41)",  # truncated: TC
    END,
]

DOT = [  # one cold DoT connection, two queries, then the client closes
    START,
    "1795413065.831749 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [S], seq 2752822083, win 64240, "
    "options [mss 1460,sackOK,TS val 1895637540 ecr 0,nop,wscale 10,tfo  cookiereq,nop,nop], length 0",
    "1795413065.831810 ifb0  In  IP 198.18.97.53.853 > 198.18.96.2.39652: Flags [S.], seq 2764306570, "
    "ack 2752822084, win 65160, options [mss 1460,sackOK,TS val 3138133074 ecr 1895637540,nop,wscale 10], length 0",
    "1795413065.831829 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [.], ack 1, win 63, "
    "options [nop,nop,TS val 1895637540 ecr 3138133074], length 0",
    "1795413065.832088 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [P.], seq 1:278, ack 1, win 63, "
    "options [nop,nop,TS val 1895637540 ecr 3138133074], length 277",
    "1795413065.832111 ifb0  In  IP 198.18.97.53.853 > 198.18.96.2.39652: Flags [.], ack 278, win 64, "
    "options [nop,nop,TS val 3138133074 ecr 1895637540], length 0",
    "1795413065.832817 ifb0  In  IP 198.18.97.53.853 > 198.18.96.2.39652: Flags [P.], seq 1:801, ack 278, win 64, "
    "options [nop,nop,TS val 3138133075 ecr 1895637540], length 800",
    "1795413065.834016 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [P.], seq 278:358, ack 801, win 63, "
    "options [nop,nop,TS val 1895637542 ecr 3138133075], length 80",
    "1795413065.834114 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [P.], seq 358:510, ack 801, "
    "win 63, options [nop,nop,TS val 1895637542 ecr 3138133075], length 152",
    "1795413065.834383 ifb0  In  IP 198.18.97.53.853 > 198.18.96.2.39652: Flags [P.], seq 801:1293, ack 510, "
    "win 64, options [nop,nop,TS val 3138133077 ecr 1895637542], length 492",
    "1795413065.834545 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [P.], seq 510:662, ack 1293, "
    "win 63, options [nop,nop,TS val 1895637543 ecr 3138133077], length 152",
    "1795413065.834638 ifb0  In  IP 198.18.97.53.853 > 198.18.96.2.39652: Flags [P.], seq 1293:1785, ack 662, "
    "win 64, options [nop,nop,TS val 3138133077 ecr 1895637543], length 492",
    "1795413065.836785 ifb0  Out IP 198.18.96.2.39652 > 198.18.97.53.853: Flags [R], seq 2752822770, win 0, length 0",
    END,
]


def test_do53_queries_are_matched_to_answers_whatever_the_type_rcode_or_flags():
    assert do53_durations(DO53) == {
        "www.lab.test": 251,
        "no-such-host.lab.test": 72,
        "www.google.com": 82,
        "big.lab.test": 56,
    }


def test_an_unanswered_query_is_left_out_and_a_retransmit_keeps_the_first_answer():
    lines = [
        "1.000000 c0    Out IP 10.0.0.2.1111 > 10.0.0.53.53: 7+ A? lost.test. (27)",
        "2.000000 c0    Out IP 10.0.0.2.2222 > 10.0.0.53.53: 8+ A? twice.test. (28)",
        "2.000100 c0    In  IP 10.0.0.53.53 > 10.0.0.2.2222: 8* 1/0/0 A 10.0.0.9 (44)",
        "3.000000 c0    Out IP 10.0.0.2.3333 > 10.0.0.53.53: 9+ A? twice.test. (28)",
        "3.000500 c0    In  IP 10.0.0.53.53 > 10.0.0.2.3333: 9* 1/0/0 A 10.0.0.9 (44)",
        "4.000000 c0    In  IP 10.0.0.53.53 > 10.0.0.2.4444: 10* 1/0/0 A 10.0.0.9 (44)",  # answer to nothing
    ]
    assert do53_durations(lines) == {"twice.test": 100}


def test_an_answer_must_match_port_and_id():
    lines = [
        "1.000000 c0    Out IP 10.0.0.2.1111 > 10.0.0.53.53: 7+ A? a.test. (24)",
        "1.000100 c0    In  IP 10.0.0.53.53 > 10.0.0.2.1111: 8 0/0/0 (24)",  # other ID
        "1.000200 c0    In  IP 10.0.0.53.53 > 10.0.0.2.1112: 7 0/0/0 (24)",  # other port
        "1.000300 c0    In  IP 10.0.0.53.53 > 10.0.0.2.1111: 7 NXDomain 0/1/0 (24)",
    ]
    assert do53_durations(lines) == {"a.test": 300}


def test_ipv6_do53_is_parsed_too():
    lines = [
        "1.000000 c0    Out IP6 fd00::2.1111 > fd00::53.53: 7+ [1au] AAAA? six.test. (37)",
        "1.000042 c0    In  IP6 fd00::53.53 > fd00::2.1111: 7* 1/0/1 AAAA fd00::9 (65)",
    ]
    assert do53_durations(lines) == {"six.test": 42}


def test_markers_are_recognised_and_never_taken_for_dns():
    assert is_marker(START) and is_marker(END)
    assert not any(is_marker(line) for line in DO53[1:-1] + DOT[1:-1])
    assert do53_durations([START, END]) == {} and exchanges_from_lines([START, END], 853) == []


def test_tls_exchanges_are_client_data_runs_then_server_data_runs():
    assert exchanges_from_lines(DOT, 853) == [
        Exchange(1795413065.832088, 1795413065.832817),  # ClientHello -> ServerHello..Finished
        Exchange(1795413065.834016, 1795413065.834383),  # Finished + first query -> answer
        Exchange(1795413065.834545, 1795413065.834638),  # second query -> answer
    ]
    assert exchanges_from_lines(DOT, 853)[-1].us == 93


def test_kernel_drops_are_read_from_tcpdumps_summary():
    summary = (
        "tcpdump: listening on any\n44 packets captured\n60 packets received by filter\n16 packets dropped by kernel\n"
    )
    assert dropped_by_kernel(summary) == 16
    assert dropped_by_kernel("2 packets captured\n2 packets received by filter\n1 packet dropped by kernel\n") == 1
    assert dropped_by_kernel("2 packets captured\n2 packets received by filter\n0 packets dropped by kernel\n") == 0
    assert dropped_by_kernel("") == 0


def test_the_filter_lets_the_markers_through():
    assert capture_bpf(["udp", "port", "53"]) == [
        "(",
        "udp",
        "port",
        "53",
        ")",
        "or",
        "(",
        "udp",
        "and",
        "dst",
        "host",
        "127.0.0.1",
        "and",
        "dst",
        "portrange",
        f"{MARKER_START}-{MARKER_END}",
        ")",
    ]
    assert capture_bpf([]) == []  # no filter: everything, markers included
