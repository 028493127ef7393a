# SPDX-License-Identifier: Apache-2.0
"""Bad command-line values, inventories and endpoints: refused at once, one line naming the value.

Every command exits 1 on bad input, drift included (a scheduler reads drift's 2 as "drift found").
Nothing may be written: no state directory (where default run artifacts go) appears for a refused run.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz import harness
from tests.fuzz.harness import Case, run

NO_RUN = (harness.STATE,)  # the state directory of default run artifacts: a refused run never makes it
AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-secret", "AWS_EC2_METADATA_DISABLED": "true"}


def write(name: str, content: bytes | str) -> object:
    def setup(tmp: Path) -> None:
        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return setup


GOOD_INVENTORY = write("inventory.yml", "all:\n  hosts:\n    gpu-1:\n      gpufabric_profile: aws/p5.48xlarge\n")
BAD_CATALOG = write("bad-catalog.yml", "profiles: [unclosed\n")

CASES = [
    Case("plan-tier-unknown", ("plan", "-i", "localhost,", "--tier", "gold"), names="'gold'"),
    Case("catalog-show-unknown", ("catalog", "show", "nope/none"), names="'nope/none'"),
    # --serial and --max-fail: refused before anything runs (an absurd --serial made Ansible loop forever)
    *(
        Case(
            f"apply-serial-{value}",
            ("apply", "-i", "localhost,", "--serial", value),
            names=repr(value),
            untouched=NO_RUN,
        )
        for value in ("99999999999999999999", "100001", "0", "0%", "101%", "-3", "abc", "1e3", "")
    ),
    *(
        Case(
            f"apply-max-fail-{value}",
            ("apply", "-i", "localhost,", "--max-fail", value),
            names=repr(value),
            untouched=NO_RUN,
        )
        for value in ("101%", "-1%", "1000", "ten", "50.5%")
    ),
    # a missing or invalid --catalog: refused before any host is touched, as plan does
    Case(
        "apply-catalog-missing",
        ("apply", "-i", "inventory.yml", "--catalog", "missing.yml"),
        names="missing.yml",
        setup=GOOD_INVENTORY,
        untouched=NO_RUN,
    ),
    Case(
        "apply-catalog-invalid",
        ("apply", "-i", "inventory.yml", "--catalog", "bad-catalog.yml"),
        names="bad-catalog.yml",
        setup=lambda tmp: (GOOD_INVENTORY(tmp), BAD_CATALOG(tmp)),
        untouched=NO_RUN,
    ),
    Case(
        "drift-catalog-missing",
        ("drift", "-i", "inventory.yml", "--catalog", "missing.yml"),
        names="missing.yml",
        exit_code=1,
        setup=GOOD_INVENTORY,
        untouched=NO_RUN,
    ),
    Case(
        "drift-catalog-invalid",
        ("drift", "-i", "inventory.yml", "--catalog", "bad-catalog.yml", "--json-file", "r.json"),
        names="bad-catalog.yml",
        exit_code=1,
        setup=lambda tmp: (GOOD_INVENTORY(tmp), BAD_CATALOG(tmp)),
        untouched=(*NO_RUN, "r.json"),
    ),
    Case(
        "drift-limit-empty",
        ("drift", "-i", "inventory.yml", "--limit", ""),
        names="--limit ''",
        exit_code=1,
        setup=GOOD_INVENTORY,
        untouched=NO_RUN,
    ),
    # inventories: ansible-inventory's real cause, not its last line ("No inventory was parsed")
    Case("inventory-missing-file", ("plan", "-i", "missing.yml"), names="'missing.yml': no such file"),
    Case("inventory-lone-host-name", ("plan", "-i", "gpu-1"), names="a list of hosts needs a comma"),
    Case(
        "inventory-not-utf8",
        ("plan", "-i", "inv.yml"),
        names="not UTF-8 text (byte 0xff",
        setup=write("inv.yml", b"all:\n  hosts:\n    gpu\xff1: {}\n"),
    ),
    Case(
        "inventory-bad-host-range",
        ("plan", "-i", "inv.ini"),
        names="host range must specify equal-length",
        setup=write("inv.ini", "[gpu]\nnode[01:x]\n"),
    ),
    Case(
        "inventory-bad-yaml",
        ("plan", "-i", "inv.yml"),
        names="inv.yml",
        setup=write("inv.yml", "all:\n  hosts: [unclosed\n"),
    ),
    Case(
        "drift-inventory-missing", ("drift", "-i", "missing.yml"), names="no such file", exit_code=1, untouched=NO_RUN
    ),
    Case("apply-inventory-missing", ("apply", "-i", "missing.yml"), names="no such file", untouched=NO_RUN),
    Case(
        "plan-managed-flag-not-boolean",
        ("plan", "-i", "inv.yml"),
        names="gpufabric_managed is 'maybe'",
        setup=write("inv.yml", "all:\n  hosts:\n    gpu-1:\n      gpufabric_managed: maybe\n"),
    ),
    # --endpoint-url: a URL, https (or http to loopback), refused before any SDK sees it
    *(
        Case(
            f"endpoint-{label}",
            (
                "inventory",
                "build",
                "--source",
                "aws",
                "--region",
                "us-east-1",
                "--endpoint-url",
                value,
                "-o",
                "out.yml",
            ),
            names=repr(value),
            env=AWS,
            untouched=("out.yml",),
        )
        for label, value in (
            ("not-a-url", "notaurl"),
            ("no-host", "https://"),
            ("ftp", "ftp://example.com"),
            ("http-not-loopback", "http://10.0.0.1:8080"),
            ("bad-port", "http://127.0.0.1:port"),
            ("space", "https://ec2 .example.com"),
        )
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    run(case, tmp_path)


class _WebPage(http.server.BaseHTTPRequestHandler):
    """Anything but an API: the login page of a proxy, a web server on the wrong port."""

    def _page(self) -> None:
        body = b"<html><body>Please sign in</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _page

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web_page() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WebPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_an_endpoint_that_answers_a_web_page_is_an_error_not_an_empty_fleet(web_page: str, tmp_path: Path) -> None:
    argv = ("inventory", "build", "--source", "aws", "--region", "us-east-1", "--endpoint-url", web_page, "-o", "o.yml")
    run(Case("endpoint-web-page", argv, names="did not answer as the EC2 API", env=AWS, untouched=("o.yml",)), tmp_path)
