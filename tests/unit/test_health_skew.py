# SPDX-License-Identifier: Apache-2.0
"""Version skew across the fleet (gpufabric.health.judge_skew), over hosts' ``versions`` as health_info returns
them: pure Python, no Ansible. Version strings are SIMULATED."""

from __future__ import annotations

from gpufabric.health import EXIT_UNHEALTHY, HealthResult, HostHealth, judge_skew


def host(driver: str | None, firmware: str | None = "28.39.1002", status: str = "pass") -> HostHealth:
    versions = {
        "driver": [driver] if driver else [],
        "vbios": [],
        "hca_firmware": [firmware] if firmware else [],
        "nccl": ["2.21.5-1+cuda12.4"] if driver else [],
    }
    return HostHealth(status=status, counts={"pass": 10, "fail": 0, "unknown": 0}, versions=versions)


def skew(result: HostHealth) -> list[tuple[str, str, str | None]]:
    return [(item["subject"], item["status"], item["action"]) for item in result.verdicts]


def test_a_minority_driver_is_a_finding_on_its_host_only():
    hosts = {"a": host("550.90.07"), "b": host("550.90.07"), "c": host("550.90.07"), "d": host("535.183.01")}
    judge_skew(hosts)
    assert skew(hosts["d"]) == [("driver", "fail", "monitor"), ("hca_firmware", "pass", None), ("nccl", "pass", None)]
    assert (hosts["d"].status, hosts["d"].action, hosts["d"].counts["fail"]) == ("fail", "monitor", 1)
    assert hosts["d"].verdicts[0]["message"] == "driver 535.183.01; 3 of 4 hosts have 550.90.07"
    assert hosts["d"].verdicts[0]["evidence"]["fleet"] == {"550.90.07": 3, "535.183.01": 1}
    majority = [("driver", "pass", None), ("hca_firmware", "pass", None), ("nccl", "pass", None)]
    assert [skew(hosts[name]) for name in "abc"] == [majority] * 3
    assert hosts["a"].status == "pass"
    assert HealthResult(hosts).exit_code == EXIT_UNHEALTHY


def test_hca_firmware_skew_and_hosts_without_a_reading_are_left_out():
    hosts = {
        "a": host("550.90.07"),
        "b": host("550.90.07"),
        "c": host("550.90.07", "28.36.1010"),
        "d": host(None, None),
        "down": host("410.48", status="error"),
    }
    judge_skew(hosts)
    assert skew(hosts["c"]) == [("driver", "pass", None), ("hca_firmware", "fail", "monitor"), ("nccl", "pass", None)]
    assert skew(hosts["d"]) == [] and skew(hosts["down"]) == []
    assert hosts["a"].verdicts[0]["evidence"]["fleet"] == {"550.90.07": 3}


def test_a_tie_has_no_majority_and_is_unknown():
    hosts = {"a": host("550.90.07"), "b": host("550.90.07"), "c": host("535.183.01"), "d": host("535.183.01")}
    judge_skew(hosts)
    assert {skew(item)[0] for item in hosts.values()} == {("driver", "unknown", None)}
    assert hosts["a"].status == "unknown"


def test_two_hosts_cannot_say_which_is_off():
    hosts = {"a": host("550.90.07"), "b": host("535.183.01")}
    judge_skew(hosts)
    assert skew(hosts["a"]) == skew(hosts["b"]) == []
