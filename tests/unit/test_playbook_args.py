# SPDX-License-Identifier: Apache-2.0
"""The ansible-playbook options gpufabric passes through: their command line, checks and redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufabric import playbook_args, runs
from gpufabric.errors import UserError


def secret(name: str) -> bool:
    return runs.is_secret(name, set())


def test_the_options_become_ansible_playbook_arguments_in_order_with_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("id_ed25519", "become.txt", "vault.txt", "prod.txt"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "vars.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")  # only ansible-playbook opens it
    args = playbook_args.build(
        extra_vars=["a=1", "@vars.yml", '{"b": [1, 2]}'],
        user="ops",
        private_key=Path("id_ed25519"),
        become_password_file=Path("become.txt"),
        vault_ids=["prod@prod.txt"],
        vault_password_files=[Path("vault.txt")],
        verbosity=3,
        tags=["nccl_env,sriov"],
        skip_tags=["reboot"],
    )
    # ansible-playbook runs in ansible-runner's private directory: every path is absolute.
    assert args.cmdline() == [
        "-e", "a=1", "-e", f"@{tmp_path}/vars.yml", "-e", '{"b": [1, 2]}',
        "-u", "ops",
        "--private-key", f"{tmp_path}/id_ed25519",
        "--become-password-file", f"{tmp_path}/become.txt",
        "--vault-id", f"prod@{tmp_path}/prod.txt",
        "--vault-password-file", f"{tmp_path}/vault.txt",
        "-vvv",
        "--tags", "nccl_env,sriov",
        "--skip-tags", "reboot",
    ]  # fmt: skip
    assert playbook_args.passwords(args) == {}
    assert playbook_args.PlaybookArgs().cmdline() == []


def test_ask_become_pass_asks_once_and_keeps_the_password_off_the_command_line() -> None:
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return "s3cret-become"

    args = playbook_args.build(ask_become_pass=True, ask=ask)
    assert asked == ["BECOME password: "]
    assert args.cmdline() == ["--ask-become-pass"]
    assert playbook_args.passwords(args) == {playbook_args.BECOME_PROMPT: "s3cret-become"}
    assert "s3cret" not in repr(args)


def test_inline_extra_vars_with_secrets_are_redacted_and_others_kept() -> None:
    args = [
        "--check", "-e", "who=ops db_password=hunter2", "-e", '{"site": {"api_token": "t0k"}, "n": 1}',
        "-e", "@/etc/vars.yml", "--extra-vars=site_pin=1234", "-e", "plain=yes", "-e", "{unclosed",
    ]  # fmt: skip
    out = playbook_args.redact_cmdline(args, secret, "X")
    assert out[:2] == ["--check", "-e"]
    assert json.loads(out[2]) == {"who": "ops", "db_password": "X"}
    assert json.loads(out[4]) == {"site": {"api_token": "X"}, "n": 1}
    assert out[5:7] == ["-e", "@/etc/vars.yml"], "a file name holds no value"
    assert out[7] == "--extra-vars=site_pin=1234", "not a secret name"
    assert out[8:10] == ["-e", "plain=yes"]
    assert out[10:] == ["-e", "X"], "a value that cannot be read is replaced whole"
    marked = playbook_args.redact_cmdline(["-e", "site_pin=1234"], lambda name: name == "site_pin", "X")
    assert json.loads(marked[1]) == {"site_pin": "X"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"extra_vars": ["@missing.yml"]}, r"^-e @missing.yml: no such file; accepted: a readable file$"),
        ({"extra_vars": ["@/tmp"]}, r"^-e @/tmp: is a directory; accepted: a readable file$"),
        ({"private_key": Path("/dev/null")}, r"^--private-key /dev/null: is not a regular file; accepted: a readable"),
        ({"extra_vars": ["@list.yml"]}, r"^-e @list.yml: list.yml holds no YAML mapping"),
        ({"extra_vars": [""]}, r"^-e '': empty; accepted: KEY=VALUE"),
        ({"extra_vars": ["[1, 2]"]}, r"^-e '\[1, 2\]': not a mapping"),
        ({"extra_vars": ["{a: [}"]}, r"^-e '\{a: \[\}': cannot be read"),
        ({"private_key": Path("nokey")}, r"^--private-key nokey: no such file"),
        ({"become_password_file": Path("nofile")}, r"^--become-password-file nofile: no such file"),
        ({"vault_password_files": [Path("nofile")]}, r"^--vault-password-file nofile: no such file"),
        ({"vault_ids": ["prod@prompt"]}, r"^--vault-id prod@prompt: prompt is not supported; accepted: a password"),
        ({"vault_ids": ["prod@nofile"]}, r"^--vault-id prod@nofile: no such file"),
        ({"ask_become_pass": True, "become_password_file": Path("x")}, r"not both"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(
    options: dict[str, object], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "list.yml").write_text("- a\n")
    with pytest.raises(UserError, match=message):
        playbook_args.build(**options, ask=lambda prompt: pytest.fail("asked for a password"))  # type: ignore[arg-type]
