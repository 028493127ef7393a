# SPDX-License-Identifier: Apache-2.0
"""`gpufabric bake --json` on the command line (typer's CliRunner, the bake itself replaced): the result on
stdout as JSON, the progress on stderr, the exit code the image's. tests/lab/test_bake.py bakes for real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufabric import bake, cli, runs


@pytest.mark.parametrize("committed", [True, False])
def test_json_prints_the_bake_on_stdout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, committed: bool) -> None:
    seen: dict[str, Any] = {}

    def fake_bake(options: bake.Options, progress: Any) -> bake.Result:
        seen["options"] = options
        progress("bake aws/p5.48xlarge on the lab image")
        rc = 0 if committed else 2
        run = runs.PlaybookRun(rc, "successful" if committed else "failed", [], tmp_path / "run", 12.5, ["c"])
        return bake.Result(options.tag, run, committed=committed)

    monkeypatch.setattr(bake, "bake", fake_bake)
    args = ["bake", "--profile", "aws/p5.48xlarge", "--tag", "localhost/gpu:1", "--tier", "best", "--json"]
    result = CliRunner().invoke(cli.app, [*args, "--artifacts", str(tmp_path)])
    assert result.exit_code == (0 if committed else 1), result.output
    assert json.loads(result.stdout) == {
        "profile": "aws/p5.48xlarge",
        "tier": "best",
        "image": seen["options"].image,
        "tag": "localhost/gpu:1",
        "committed": committed,
        "exit_code": 0 if committed else 1,
        "rc": 0 if committed else 2,
        "status": "successful" if committed else "failed",
        "duration_seconds": 12.5,
        "artifacts": str(tmp_path),
    }
    assert "bake aws/p5.48xlarge on the lab image" in result.stderr
