# SPDX-License-Identifier: Apache-2.0
"""`gpufabric verify`: reports from SYNTHETIC results, exit codes 0/1/2, and the ansible-runner run.

The run itself is exercised with a stand-in playbook over local connections (it checks the extra
variables and the inventory's own variables, then leaves results as the nccl_tests role does); the
real playbooks/verify.yml runs end to end in the nccl_tests molecule scenario.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpufabric import playbook_args, verify
from gpufabric.errors import UserError
from tests.unit.test_verify_plot import png_size
from tests.unit.test_verify_report import FIXTURES, GIB, MIB, make_results, synthetic_output

SIZES = [128 * MIB, 512 * MIB, 2 * GIB, 8 * GIB]


def one_line_error(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert text in result.stderr, result.stderr


def test_from_results_pass_writes_report_plot_and_table(gpufabric, tmp_path):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    result = gpufabric("verify", "--from-results", str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "nccl-tests verification: baremetal/hgx-h100-ib-ndr" in out
    assert "all_reduce" in out and "PASS" in out and "454.0" in out and ">= 420.0 GB/s at >= 8 GiB" in out
    assert f"report: {tmp_path / 'report.json'}, plot: {tmp_path / 'busbw.png'}" in out
    assert "warning" not in result.stderr
    built = json.loads((tmp_path / "report.json").read_text())
    assert built["status"] == "pass" and built["tiers"]["best"]["runs"][0]["measured_busbw"] == 454.02
    assert png_size(tmp_path / "busbw.png")[0] > 0


# The CLI as `pip install gpufabric` (no plot extra) leaves it: matplotlib cannot be imported.
WITHOUT_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; from gpufabric.cli import main; main()"


def test_without_matplotlib_everything_but_the_plot_is_written_and_the_extra_is_named(ansible_env, tmp_path):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    (tmp_path / "busbw.png").write_bytes(b"an earlier plot")
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MATPLOTLIB, "verify", "--from-results", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**ansible_env, "COLUMNS": "200"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"report: {tmp_path / 'report.json'}\n" in result.stdout and "plot:" not in result.stdout
    (line,) = [line for line in result.stderr.splitlines() if "busbw.png" in line]
    assert "matplotlib is not installed" in line and "pip install 'gpufabric[plot]'" in line
    # The earlier plot went with the judgement it drew: the new report.json has no plot beside it.
    assert "removed the earlier" in line and not (tmp_path / "busbw.png").exists()
    assert json.loads((tmp_path / "report.json").read_text())["status"] == "pass"


def test_from_results_fail_exits_1_with_the_reason(gpufabric, tmp_path):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "data_errors.txt"})
    result = gpufabric("verify", "--from-results", str(tmp_path))
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "data errors" in result.stdout
    assert "Traceback" not in result.stderr


def test_json_prints_the_report(gpufabric, tmp_path):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    out = tmp_path / "elsewhere"
    result = gpufabric("verify", "--from-results", str(tmp_path), "-o", str(out), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads((out / "report.json").read_text())
    assert (out / "busbw.png").is_file() and not (tmp_path / "report.json").exists()


def test_compare_from_results_shows_the_speedup_and_warns_about_the_baseline(gpufabric, tmp_path):
    make_results(tmp_path, "standard", {"all_reduce": synthetic_output(9.6, SIZES)})
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    result = gpufabric("verify", "--from-results", str(tmp_path), "--compare", "standard,best", "--title", "SYNTHETIC")
    assert result.returncode == 0, result.stderr
    assert "speed-up best/standard: all_reduce on 2 node(s)" in result.stdout
    assert "UNJUDGED" in result.stdout and "tier standard is a baseline" in " ".join(result.stdout.split())
    assert "warning: 1 unjudged: not a clean pass" in result.stderr
    built = json.loads((tmp_path / "report.json").read_text())
    assert [point["size"] for point in built["speedup"][0]["sizes"]] == SIZES
    # --tier picks one tier out of the results.
    result = gpufabric("verify", "--from-results", str(tmp_path), "--tier", "best", "--json")
    assert list(json.loads(result.stdout)["tiers"]) == ["best"] and result.returncode == 0


def test_catalog_override_is_used_for_the_judgement(gpufabric, tmp_path):
    make_results(tmp_path / "r", "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    site = tmp_path / "site.yml"
    site.write_text(
        yaml.safe_dump(
            {
                "profiles": {
                    "baremetal/hgx-h100-ib-ndr": {
                        "bandwidth": {
                            "thresholds": [
                                {
                                    "collective": "all_reduce",
                                    "min_nodes": 2,
                                    "max_nodes": 2,
                                    "algo": "default",
                                    "min_size_bytes": 8 * GIB,
                                    "min_busbw_gbyte_s": 470,
                                    "verified": True,
                                    "basis": "SYNTHETIC site calibration",
                                }
                            ]
                        }
                    }
                }
            }
        )
    )
    result = gpufabric("verify", "--from-results", str(tmp_path / "r"), "--catalog", str(site))
    assert result.returncode == 1 and "below the threshold" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give -i INVENTORY to run nccl-tests, or --from-results DIR"),
        (("-i", "hosts.yml", "--from-results", "."), "not both"),
        (("-i", "hosts.yml", "--tier", "fast"), "unknown --tier 'fast'; accepted: best, standard"),
        (("-i", "hosts.yml", "--compare", "best"), "must name two different tiers"),
        (("-i", "hosts.yml", "--compare", "best,best"), "must name two different tiers"),
        (("-i", "hosts.yml", "--tier", "best", "--compare", "standard,best"), "give --tier or --compare, not both"),
        (("-i", "hosts.yml", "--collective", "all_reduce,bogus"), "unknown --collective 'bogus'; accepted: all_reduce"),
        (("--from-results", "/nonexistent/gpufabric"), "not a directory"),
        (("--from-results", "EMPTY"), "no run.json under"),
    ],
)
def test_usage_errors_exit_2_in_one_line(gpufabric, tmp_path, args, message):
    args = tuple(str(tmp_path) if arg == "EMPTY" else arg for arg in args)
    one_line_error(gpufabric("verify", *args), message)


def test_nodes_must_be_positive(gpufabric):
    result = gpufabric("verify", "-i", "hosts.yml", "--nodes", "0")
    assert result.returncode == 1 and "Traceback" not in result.stderr


def test_an_output_directory_with_results_is_refused_before_running(gpufabric, tmp_path):
    make_results(tmp_path, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    one_line_error(
        gpufabric("verify", "-i", str(tmp_path / "none.yml"), "-o", str(tmp_path)),
        f"choose a new directory, or re-judge them with --from-results {tmp_path}",
    )


# --- the ansible-runner run, with a stand-in playbook -------------------------------------------------

STAND_IN = """\
- name: Stand-in for playbooks/verify.yml
  hosts: all
  gather_facts: false
  tasks:
    - name: Check what gpufabric verify passed and what the inventory says
      ansible.builtin.assert:
        that:
          - gpufabric_verify_tier in ['best', 'standard']
          - gpufabric_verify_collectives == ['all_reduce']
          - gpufabric_verify_nodes == 2
          - nccl_tests_fail_on == 'never'
          - gpufabric_verify_results_dir is abs
          - gpufabric_verify_results_dir.endswith('/' ~ gpufabric_verify_tier)
          - site_variable == 'from the inventory'
        quiet: true

    - name: Break when the inventory says so
      ansible.builtin.fail:
        msg: SIMULATED breakage on {{ inventory_hostname }}
      when: break_tier | default('') == gpufabric_verify_tier

    - name: Leave results as the nccl_tests role does
      ansible.builtin.copy:
        src: "{{ source_dir }}/{{ gpufabric_verify_tier }}/"
        dest: "{{ gpufabric_verify_results_dir }}/"
        mode: "0644"
      run_once: true
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "source"
    make_results(source, "standard", {"all_reduce": synthetic_output(9.6, SIZES)})
    make_results(source, "best", {"all_reduce": FIXTURES / "v2_13_all_reduce_2node.txt"})
    playbook = tmp_path / "verify.yml"
    playbook.write_text(STAND_IN)
    return source, playbook


def write_inventory(path: Path, source: Path, **extra: str) -> Path:
    host = {"ansible_connection": "local", "ansible_python_interpreter": shutil.which("python3") or "python3"}
    inventory = {
        "all": {
            "hosts": {"node-a": dict(host), "node-b": dict(host)},
            "vars": {"site_variable": "from the inventory", "source_dir": str(source), **extra},
        }
    }
    path.write_text(yaml.safe_dump(inventory))
    return path


@pytest.fixture
def runner_environment(ansible_env, monkeypatch):
    for key in [key for key in os.environ if key.startswith(("ANSIBLE_", "GPUFABRIC_"))]:
        monkeypatch.delenv(key)
    for key, value in ansible_env.items():
        monkeypatch.setenv(key, value)


SECRET_VAR = "fake-verify-db-password-0123"
SECRET_ENV = "fake-verify-aws-secret-4567"


def test_run_compares_two_tiers_through_ansible_runner(tmp_path, stand_in, runner_environment, monkeypatch):
    source, playbook = stand_in
    inventory = write_inventory(tmp_path / "hosts.yml", source)
    # Secrets of the command line and of the environment reach ansible-playbook, never the run record.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ENV)
    lines: list[str] = []
    options = verify.Options(
        inventory=str(inventory),
        collectives=["all_reduce"],
        nodes=2,
        tiers=["standard", "best"],
        compare=True,
        output=tmp_path / "out",
        args=playbook_args.build(extra_vars=[f"db_password={SECRET_VAR}", "who=ops"]),
    )
    built, directory = verify.execute(options, lines.append, playbook=playbook)
    assert directory == tmp_path / "out"
    assert "[standard] running playbooks/verify.yml; results in " + str(directory / "standard") in lines
    assert "[best] node-a: Check what gpufabric verify passed and what the inventory says" in lines
    assert "[best] node-b: Check what gpufabric verify passed and what the inventory says" in lines
    assert built["status"] == "unjudged" and list(built["tiers"]) == ["standard", "best"]
    assert built["tiers"]["best"]["runs"][0]["status"] == "pass"
    assert built["speedup"][0]["sizes"][-1]["speedup"] > 40
    assert (directory / "best" / "ansible.log").is_file() and (directory / "report.json").is_file()
    assert png_size(directory / "busbw.png")[0] > 0
    # Each tier keeps the run record apply and drift keep (runs.run_playbook), beside its ansible.log.
    for tier in ("standard", "best"):
        artifacts = directory / tier / verify.ARTIFACTS_DIR
        expected = {"command", "gpufabric-run.json", "job_events", "rc", "status", "stdout"}
        assert expected <= {path.name for path in artifacts.iterdir()}
        assert (artifacts / "rc").read_text().strip() == "0" and any((artifacts / "job_events").iterdir())
        assert (artifacts / "stdout").read_text() == (directory / tier / "ansible.log").read_text()
        record = json.loads((artifacts / "gpufabric-run.json").read_text())
        assert record["settings"] == "stock" and record["extravars"]["gpufabric_verify_tier"] == tier
        assert record["ansible_args"] == ["-e", json.dumps({"db_password": "<redacted by gpufabric>"}), "-e", "who=ops"]
        command = json.loads((artifacts / "command").read_text())
        assert command["env"]["AWS_SECRET_ACCESS_KEY"] == "<redacted by gpufabric>"
    assert "[best] 2/2 hosts done, 1 changed, 0 failed, 0 unreachable" in " ".join(lines)
    for path in directory.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert SECRET_VAR not in text and SECRET_ENV not in text, path


def test_a_broken_play_fails_the_tier_with_its_message_on_the_limited_hosts(tmp_path, stand_in, runner_environment):
    source, playbook = stand_in
    inventory = write_inventory(tmp_path / "hosts.yml", source, break_tier="best")
    lines: list[str] = []
    options = verify.Options(
        inventory=str(inventory),
        collectives=["all_reduce"],
        nodes=2,
        tiers=["best"],
        output=tmp_path / "out",
        limit=["node-b"],
    )
    built, _directory = verify.execute(options, lines.append, playbook=playbook)
    errors = built["tiers"]["best"]["errors"]
    assert "node-b: Break when the inventory says so: SIMULATED breakage on node-b" in errors
    assert errors[-1].startswith("the playbook's output: ")
    assert any("FAILED: SIMULATED breakage on node-b" in line for line in lines)
    assert not any("node-a" in line for line in [*lines, *errors]), "--limit left node-a out"
    assert built["status"] == "fail" and built["tiers"]["best"]["runs"] == []
    with pytest.raises(UserError, match="has no host matching --limit 'rack9'"):
        verify.execute(dataclasses.replace(options, limit=["rack9"]), lines.append, playbook=playbook)


def test_the_runner_environment_finds_the_podman_connection(ansible_env):
    """Inventories of podman containers (the nccl_tests molecule scenario) connect through containers.podman."""
    env = {**ansible_env}
    env.update(verify.runner_env())
    result = subprocess.run(
        ["ansible-doc", "-t", "connection", "containers.podman.podman", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "containers.podman.podman" in json.loads(result.stdout)
    assert (
        verify.runner_env()["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)[0]
        == env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)[0]
    )
