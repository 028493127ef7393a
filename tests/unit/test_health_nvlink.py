# SPDX-License-Identifier: Apache-2.0
"""NVLink and service verdicts from recorded `nvidia-smi nvlink -s` output and systemd states (pure Python).

V100_WITH_INACTIVE is the output quoted in Azure/azhpc-diagnostics#73 (2022-03-23: GPU 3 of a V100 host with links
3 and 5 inactive; the issue elides the UUID as "..."). GB200_GPU0 is GPU 0 of the output quoted in
NVIDIA/k8s-test-infra#371 (2026-06-11: 18 links at 53.125 GB/s). Other GPUs are those lines with another index
(SIMULATED).
"""

from __future__ import annotations

from gpufabric.collection import module_utils

health = module_utils("health")

V100_WITH_INACTIVE = """GPU 3: Tesla V100-SXM2-32GB (UUID: ...)
         Link 0: 25.781 GB/s
         Link 1: 25.781 GB/s
         Link 2: 25.781 GB/s
         Link 3: <inactive>
         Link 4: 25.781 GB/s
         Link 5: <inactive>
"""
GB200_GPU0 = "GPU 0: NVIDIA GB200 (UUID: GPU-d1b93026-6d5b-03bd-3a71-f85b47a61bde)\n" + "".join(
    f"         Link {link}: 53.125 GB/s\n" for link in range(18)
)


def gb200(index: int, links: int = 18) -> str:
    lines = GB200_GPU0.replace("GPU 0:", f"GPU {index}:").splitlines(keepends=True)
    return "".join(lines[: 1 + links])


def outcome(results: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(item["subject"], item["status"], item["action"]) for item in results]


def test_the_recorded_outputs_parse():
    [v100] = health.parse_nvlink_status(V100_WITH_INACTIVE)
    assert (v100["index"], v100["name"]) == (3, "Tesla V100-SXM2-32GB")
    assert v100["links"] == {0: 25.781, 1: 25.781, 2: 25.781, 3: None, 4: 25.781, 5: None}
    [gpu0] = health.parse_nvlink_status(GB200_GPU0)
    assert (gpu0["name"], len(gpu0["links"]), set(gpu0["links"].values())) == ("NVIDIA GB200", 18, {53.125})


def test_four_gb200_gpus_with_all_links_up_pass():
    status = health.parse_nvlink_status("".join(gb200(index) for index in range(4)))
    results = health.check_nvlink(status, True, 4)
    assert outcome(results) == [(f"gpu{index}", "pass", None) for index in range(4)]
    assert results[0]["message"] == "GPU 0: 18 NVLink links up"


def test_an_inactive_link_isolates_its_gpu():
    [result] = health.check_nvlink(health.parse_nvlink_status(V100_WITH_INACTIVE), True, 1)
    assert (result["subject"], result["status"], result["action"]) == ("gpu3", "fail", "isolate")
    assert result["message"] == "GPU 3: NVLink 3, 5 inactive (4 of 6 up)"


def test_a_gpu_with_fewer_links_than_its_peers_and_a_gpu_missing_fail():
    status = health.parse_nvlink_status(gb200(0) + gb200(1) + gb200(2, links=12))
    results = health.check_nvlink(status, True, 4)
    assert outcome(results) == [
        ("gpus", "fail", "isolate"),
        ("gpu0", "pass", None),
        ("gpu1", "pass", None),
        ("gpu2", "fail", "isolate"),
    ]
    assert results[3]["message"] == "GPU 2: 12 NVLink links up; the host's other GPUs have 18"


def test_nvlink_is_judged_only_where_the_profile_has_it_and_unknown_without_an_answer():
    assert health.check_nvlink(None, False, 8) == []
    assert outcome(health.check_nvlink(None, True, 8)) == [("gpus", "unknown", None)]


def test_services_by_their_active_state():
    results = health.check_services(
        {"nvidia-fabricmanager": "failed", "nvidia-imex": "active", "a-starting": "activating", "asked-not": None}
    )
    assert outcome(results) == [
        ("a-starting", "unknown", None),
        ("asked-not", "unknown", None),
        ("nvidia-fabricmanager", "fail", "reboot"),
        ("nvidia-imex", "pass", None),
    ]
    assert results[2]["message"] == "nvidia-fabricmanager is failed; the plan needs it running"
