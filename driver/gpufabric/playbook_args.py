# SPDX-License-Identifier: Apache-2.0
"""The ansible-playbook options that `apply`, `drift`, `verify` and `bake` pass through unchanged.

-e/--extra-vars, -u, --private-key, -K/--become-password-file, --vault-id/--vault-password-file,
-v, --tags/--skip-tags go to ansible-playbook as the user wrote them, so they mean exactly what they
mean to ansible-playbook: `-e k=v` is a string, `-e '{"k": 1}'` typed, `-e @vars.yml` a file (vault
encrypted or not). gpufabric's own variables (--tier, --catalog, the run's bookkeeping) come after
them and win.

Secrets never rest on disk: the become password that -K asks for goes to ansible-playbook's prompt
through ansible-runner (its private directory is removed after the run), and `record()` gives the
options with every secret of an inline -e replaced, for the artifacts and the reports (gpufabric.runs
rewrites ansible-runner's `command` file with it).
"""

from __future__ import annotations

import getpass
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric.collection import plugin_utils
from gpufabric.errors import UserError

# The first bytes of a file ansible-vault encrypted whole.
VAULT_HEADER = b"$ANSIBLE_VAULT;"
# ansible-playbook's prompt for --ask-become-pass, as ansible-runner's `passwords` matches prompts.
BECOME_PROMPT = r"^BECOME password.*:\s*?$"
# What ansible-playbook can read without a terminal: ansible-runner answers prompts it knows only.
VAULT_SOURCE_HINT = "a password file or an executable script (prompt needs a terminal ansible-runner does not give)"


@dataclass(frozen=True)
class PlaybookArgs:
    """The pass-through options as given on gpufabric's command line."""

    extra_vars: tuple[str, ...] = ()
    user: str | None = None
    private_key: Path | None = None
    ask_become_pass: bool = False
    become_password_file: Path | None = None
    vault_ids: tuple[str, ...] = ()
    vault_password_files: tuple[Path, ...] = ()
    verbosity: int = 0
    tags: tuple[str, ...] = ()
    skip_tags: tuple[str, ...] = ()
    # Asked once per command (drift --remediate runs three playbooks), kept in memory only.
    become_password: str | None = field(default=None, repr=False)

    def cmdline(self) -> list[str]:
        """The options as ansible-playbook arguments, in the order given."""
        args: list[str] = []
        for value in self.extra_vars:
            args += ["-e", value]
        if self.user:
            args += ["-u", self.user]
        if self.private_key:
            args += ["--private-key", str(self.private_key)]
        if self.ask_become_pass:
            args.append("--ask-become-pass")
        if self.become_password_file:
            args += ["--become-password-file", str(self.become_password_file)]
        for vault_id in self.vault_ids:
            args += ["--vault-id", vault_id]
        for path in self.vault_password_files:
            args += ["--vault-password-file", str(path)]
        if self.verbosity:
            args.append("-" + "v" * min(self.verbosity, 6))
        if self.tags:
            args += ["--tags", ",".join(self.tags)]
        if self.skip_tags:
            args += ["--skip-tags", ",".join(self.skip_tags)]
        return args

    def input_files(self) -> list[tuple[str, Path]]:
        """The files these options make ansible-playbook read, each with its option: no output may be one."""
        files = [("-e", Path(value[1:])) for value in self.extra_vars if value.startswith("@")]
        files += [("--private-key", path) for path in (self.private_key,) if path]
        files += [("--become-password-file", path) for path in (self.become_password_file,) if path]
        files += [("--vault-id", Path(vault_id.rpartition("@")[2])) for vault_id in self.vault_ids]
        return files + [("--vault-password-file", path) for path in self.vault_password_files]

    def record(self, is_secret: Callable[[str], bool]) -> list[str]:
        """cmdline() with the secrets of every inline -e replaced: what artifacts and reports keep."""
        return redact_cmdline(self.cmdline(), is_secret)


def inline_extra_vars(value: str) -> dict[str, Any] | None:
    """An inline -e value as ansible-playbook reads it (YAML/JSON when it starts with { or [, else
    key=value pairs); None for @FILE, which names a file and holds no value itself."""
    if value.startswith("@"):
        return None
    if value.lstrip().startswith(("{", "[")):
        # Bounded: a YAML bomb on the command line is refused, not expanded.
        data = plugin_utils("bounded_yaml").load_text(value, "-e")
        return data if isinstance(data, dict) else {"": data}
    from ansible.parsing.splitter import parse_kv

    return dict(parse_kv(value))


def redact_cmdline(args: list[str], is_secret: Callable[[str], bool], replacement: str = "<redacted>") -> list[str]:
    """args with the value of every -e/--extra-vars/--extra-vars=... whose keys include a secret
    rewritten as JSON with that key's value replaced (a value that cannot be read: replaced whole)."""
    out: list[str] = []
    expect_value = False
    for arg in args:
        prefix = ""
        if expect_value:
            value, expect_value = arg, False
        elif arg in ("-e", "--extra-vars"):
            out.append(arg)
            expect_value = True
            continue
        elif match := re.match(r"^(--extra-vars=|-e)(.+)$", arg):
            prefix, value = match[1], match[2]
        else:
            out.append(arg)
            continue
        out.append(prefix + _redacted_value(value, is_secret, replacement))
    return out


def _redacted_value(value: str, is_secret: Callable[[str], bool], replacement: str) -> str:
    try:
        data = inline_extra_vars(value)
    except Exception:  # whatever Ansible's parser or YAML raise, the value stays unread
        return replacement
    if data is None or not any(is_secret(str(key)) for key in _keys(data)):
        return value
    return json.dumps(_redact(data, is_secret, replacement))


def _keys(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [str(key) for key in data] + [key for item in data.values() for key in _keys(item)]
    if isinstance(data, list):
        return [key for item in data for key in _keys(item)]
    return []


def _redact(data: Any, is_secret: Callable[[str], bool], replacement: str) -> Any:
    if isinstance(data, dict):
        return {
            key: replacement if is_secret(str(key)) else _redact(item, is_secret, replacement)
            for key, item in data.items()
        }
    if isinstance(data, list):
        return [_redact(item, is_secret, replacement) for item in data]
    return data


def _readable(path: Path, given: str) -> None:
    """given: the option as the user wrote it, for the message."""
    if not path.is_file():
        # Say what it is: a directory or a FIFO named "no such file" sends the user looking for a typo.
        what = "is a directory" if path.is_dir() else "is not a regular file" if path.exists() else "no such file"
        raise UserError(f"{given}: {what}; accepted: a readable file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UserError(f"{given}: cannot be read ({exc.strerror}); accepted: a readable file") from exc


def build(
    *,
    extra_vars: list[str] | None = None,
    user: str | None = None,
    private_key: Path | None = None,
    ask_become_pass: bool = False,
    become_password_file: Path | None = None,
    vault_ids: list[str] | None = None,
    vault_password_files: list[Path] | None = None,
    verbosity: int = 0,
    tags: list[str] | None = None,
    skip_tags: list[str] | None = None,
    ask: Callable[[str], str] = getpass.getpass,
) -> PlaybookArgs:
    """The options from the command line, checked before any host is touched: every file they name
    is readable, -e values are what ansible-playbook would accept, and no option needs a terminal."""
    for value in extra_vars or []:
        if not value.strip():
            raise UserError("-e '': empty; accepted: KEY=VALUE ..., a YAML/JSON mapping, or @FILE")
        if value.startswith("@"):
            _check_vars_file(Path(value[1:]), value)
            continue
        try:
            data = inline_extra_vars(value)
        except Exception as exc:  # Ansible's parser and YAML raise many kinds
            raise UserError(
                f"-e {value!r}: cannot be read ({exc}); accepted: KEY=VALUE ..., a YAML/JSON mapping, or @FILE"
            ) from exc
        if data is not None and "" in data:
            raise UserError(f"-e {value!r}: not a mapping; accepted: KEY=VALUE ..., a YAML/JSON mapping, or @FILE")
    if ask_become_pass and become_password_file:
        raise UserError("give -K/--ask-become-pass or --become-password-file, not both")
    if private_key:
        _readable(private_key, f"--private-key {private_key}")
    if become_password_file:
        _readable(become_password_file, f"--become-password-file {become_password_file}")
    for path in vault_password_files or []:
        _readable(path, f"--vault-password-file {path}")
    for vault_id in vault_ids or []:
        source = vault_id.rpartition("@")[2]
        if source == "prompt":
            raise UserError(f"--vault-id {vault_id}: prompt is not supported; accepted: {VAULT_SOURCE_HINT}")
        _readable(Path(source), f"--vault-id {vault_id}")
    # Absolute: ansible-playbook runs in ansible-runner's private directory, not the user's.
    return PlaybookArgs(
        extra_vars=tuple(
            f"@{Path(value[1:]).resolve()}" if value.startswith("@") else value for value in extra_vars or ()
        ),
        user=user,
        private_key=private_key.resolve() if private_key else None,
        ask_become_pass=ask_become_pass,
        become_password_file=become_password_file.resolve() if become_password_file else None,
        vault_ids=tuple(_absolute_vault_id(vault_id) for vault_id in vault_ids or ()),
        vault_password_files=tuple(path.resolve() for path in vault_password_files or ()),
        verbosity=verbosity,
        tags=tuple(_split(tags)),
        skip_tags=tuple(_split(skip_tags)),
        become_password=ask("BECOME password: ") if ask_become_pass else None,
    )


def _check_vars_file(path: Path, given: str) -> None:
    """-e @FILE: a YAML mapping within bounded_yaml's limits (a YAML bomb is refused here, before
    ansible-playbook would expand it), or a vault-encrypted file, which only ansible-playbook can open."""
    _readable(path, f"-e {given}")
    with path.open("rb") as handle:
        if handle.read(len(VAULT_HEADER)) == VAULT_HEADER:
            return
    bounded_yaml = plugin_utils("bounded_yaml")
    try:
        data = bounded_yaml.load_file(path)
    except bounded_yaml.YAMLFileError as exc:
        raise UserError(f"-e {given}: cannot read a YAML mapping: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise UserError(f"-e {given}: {path} holds no YAML mapping; accepted: KEY: VALUE lines, or a vault file")


def _absolute_vault_id(vault_id: str) -> str:
    label, at, source = vault_id.rpartition("@")
    return f"{label}{at}{Path(source).resolve()}"


def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def passwords(args: PlaybookArgs) -> dict[str, str]:
    """ansible-runner's answers to ansible-playbook's prompts (under ansible-runner it has no terminal)."""
    return {BECOME_PROMPT: args.become_password} if args.become_password is not None else {}
